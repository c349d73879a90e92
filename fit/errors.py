"""The fit's domain errors: what a fit, a validation or a stored record refuses, and why.

Every error names the run, fit, file or setting and what was expected, in the library's words:
a setting by its settings field (`torque`, `params`, `format`), never by a command-line flag.
The CLI maps a `SettingError` to its flag and every `FitError` to exit status 2
(twinlake/options.py `fit_error_text`). All subclass `ValueError`, so a caller that catches
`ValueError` still catches them.
"""

from __future__ import annotations


class FitError(ValueError):
    """A fit, a validation or a record cannot do what was asked.

    suggestion: a setting that would serve instead, as (setting, value, why), or None; the
    message ends with it in the library's words (`try method = torque: ...`), the CLI's
    `error_text` with its option (`try --method torque: ...`).
    """

    def __init__(self, message: str, suggestion: tuple[str, str, str] | None = None) -> None:
        self.message, self.suggestion = message, suggestion
        super().__init__(self.text())

    def text(self, flag=None) -> str:
        """The message; `flag(setting)` names a suggested setting (default: `setting =`)."""
        if self.suggestion is None:
            return self.message
        setting, value, why = self.suggestion
        named = f"{setting} = {value}" if flag is None else f"{flag(setting)} {value}"
        return f"{self.message} (try {named}: {why})"


class SettingError(FitError):
    """A setting's value cannot be used.

    setting: the settings field (`TorqueFitSettings.torque`, `Thresholds.max_q_rmse_rad`, the
    export `format`, ...); value: the value as given, already formatted for the message (e.g.
    `repr(v)`), or None when the message is about the setting as a whole; expected: what would be
    usable (or why the value cannot be).
    """

    def __init__(self, setting: str, value: str | None, expected: str) -> None:
        self.setting, self.value, self.expected = setting, value, expected
        super().__init__(self._text(setting))

    def _text(self, name: str) -> str:
        return f"{name}{'' if self.value is None else ' ' + self.value}: {self.expected}"

    def text(self, flag=None) -> str:
        """The message; `flag(setting)` names the setting (the CLI passes its option)."""
        return self._text(self.setting if flag is None else flag(self.setting))


class DataError(FitError):
    """The recorded data cannot carry what was asked (no frames, no torque, too few rows)."""


class RecordError(FitError):
    """A stored fit or validation is missing, unreadable, or not the kind the operation needs."""


class FitNotFound(RecordError):
    """No fit of that id in the lake."""


class ModelError(FitError):
    """A model file (MJCF) or a model's parameters cannot be used as asked."""


__all__ = ["DataError", "FitError", "FitNotFound", "ModelError", "RecordError", "SettingError"]
