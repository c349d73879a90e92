"""fit/ raises its domain errors (fit/errors.py), in the library's words; the CLI names the flag.

Read with `ast` over fit/'s sources (nothing imported): a bare `raise ValueError(...)` or an
error message that names a command-line flag fails here, module by module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from twinlake.fit import FitError, FitNotFound, SettingError
from twinlake.options import error_text

FIT = Path(__file__).resolve().parents[2] / "fit"
def _raises(path: Path) -> list[ast.Raise]:
    return [n for n in ast.walk(ast.parse(path.read_text(), filename=str(path))) if isinstance(n, ast.Raise)]


def _called(node: ast.Raise) -> str | None:
    exc = node.exc
    return exc.func.id if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) else None


def _text(node: ast.AST) -> str:
    return " ".join(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))


MODULES = sorted(FIT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(FIT).as_posix())
def test_fit_raises_domain_errors_in_its_own_words(path):
    bare = [n.lineno for n in _raises(path) if _called(n) == "ValueError"]
    assert not bare, f"{path.name}: bare ValueError at line(s) {bare}: raise a fit/errors.py error"
    flags = [(n.lineno, _text(n)) for n in _raises(path) if " --" in f" {_text(n)}"]
    assert not flags, f"{path.name}: an error names a command-line flag: {flags}"


def test_the_scan_sees_a_bare_value_error_and_a_flag(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(x):\n    if x:\n        raise ValueError(f'--seeds {x}: expected >= 1')\n")
    (node,) = _raises(probe)
    assert _called(node) == "ValueError" and "--seeds" in _text(node)


def test_the_cli_names_the_flag_of_a_setting_and_where_to_find_fits():
    err = SettingError("max_q_rmse_rad", "-1.0", "expected a threshold > 0")
    assert str(err) == "max_q_rmse_rad -1.0: expected a threshold > 0"
    assert error_text(err) == "--max-q-rmse-rad -1.0: expected a threshold > 0"
    assert error_text(SettingError("train", None, "give at least one RUN")) == "--train: give at least one RUN"
    assert error_text(FitNotFound("fit 'x': none")).endswith("(see `twinlake fit list`)")
    assert isinstance(err, FitError) and isinstance(err, ValueError)
