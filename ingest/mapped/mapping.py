"""The mapping TOML of a log of the user's own layout: which source column is which signal.

`load_mapping(path) -> Mapping` reads and checks it (tomllib); every key is documented in
docs/formats.md ("Logs of your own layout"). A key or value it does not know is refused
naming the mapping file, the key and what was expected (`IngestError` on the mapping file).
Joint signals map to the canonical columns (docs/lake.md):

| mapping key | canonical columns | unit |
|---|---|---|
| `q`, `q_target`, `q_target_filtered` | `q1..7`, `q_target1..7`, `q_target_filtered1..7` | rad (or deg) |
| `dq`, `dq_target` | `dq1..7`, `dq_target1..7` | rad/s (or deg/s) |
| `tau_measured` | `tau_J1..7` (link-side torque sensor, gravity included) | N·m |
| `tau_commanded` | `tau_cmd1..7` (libfranka's `tau_d`) | N·m |
| `tau_external` | `tau_ext1..7` (libfranka's `tau_ext_hat_filtered`) | N·m |
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...catalog import JOINTS
from ..registry import IngestError

SIGNALS: dict[str, tuple[str, str]] = {
    "q": ("q", "angle"),
    "dq": ("dq", "angle"),
    "q_target": ("q_target", "angle"),
    "q_target_filtered": ("q_target_filtered", "angle"),
    "dq_target": ("dq_target", "angle"),
    "tau_measured": ("tau_J", "torque"),
    "tau_commanded": ("tau_cmd", "torque"),
    "tau_external": ("tau_ext", "torque"),
}
"""mapping key → (canonical column prefix, unit kind)."""
REQUIRED_SIGNALS = ("q", "dq")
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
ANGLE_UNITS = {"rad": 1.0, "deg": math.pi / 180.0}
CLOCKS = ("pc", "robot")
CONTROLLERS = {"idle": 0, "cartesian_impedance": 1, "joint_impedance": 2, "admittance": 3,
               "hybrid": 4}
_SECTIONS = {"time": {"column", "unit", "steps", "clock"}, "columns": set(SIGNALS),
             "units": {"angle"}, "run": {"controller", "kp", "kd", "robot", "run",
                                         "payload_kg", "filter_alpha"}}


@dataclass(frozen=True)
class Mapping:
    """A checked mapping. `columns`: canonical prefix → the 7 source names (joint 1..7);
    `time_scale`: seconds per unit of the time column; `steps`: the time column holds the
    time since the previous row (libfranka's per-callback `duration`), cumulated from 0;
    `clock`: whose clock the time column is (`pc`: the logging computer's; `robot`: the
    robot's own, also kept as `robot_time_s`); `run`: the [run] constants; `text`: the
    TOML verbatim; `table`: the parsed TOML."""

    path: Path
    time_column: str
    time_scale: float
    steps: bool
    clock: str
    columns: dict[str, tuple[str, ...]]
    angle_scale: float
    run: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    table: dict[str, Any] = field(default_factory=dict)

    def source_columns(self) -> list[str]:
        """Every source column the mapping reads, time first, in mapping order."""
        names = [self.time_column]
        for cols in self.columns.values():
            names += [c for c in cols if c not in names]
        return names


def _refuse(path: Path, key: str, message: str) -> IngestError:
    return IngestError(path, message, field=key, kind="mapping")


def load_mapping(path: Path) -> Mapping:
    """Read and check the mapping TOML at `path` (errors name the file and the key)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _refuse(path, "", f"cannot read the mapping: {exc.strerror or exc}") from None
    try:  # a UTF-8 byte-order mark, as some editors write, is not TOML text: skipped
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        utf16 = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise _refuse(path, "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                      f"{exc.start}{utf16}; expected a UTF-8 TOML file") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _refuse(path, "", f"not valid TOML: {exc}") from None
    for section, value in table.items():
        if section not in _SECTIONS:
            raise _refuse(path, section, f"unknown section [{section}]; expected any of "
                          + ", ".join(f"[{s}]" for s in _SECTIONS))
        if not isinstance(value, dict):
            raise _refuse(path, section, f"expected a table [{section}], got {value!r}")
        unknown = sorted(set(value) - _SECTIONS[section])
        if unknown:
            raise _refuse(path, f"{section}.{unknown[0]}", "unknown key; expected any of "
                          + ", ".join(sorted(_SECTIONS[section])))
    time = table.get("time", {})
    if not isinstance(time.get("column"), str) or not time["column"]:
        raise _refuse(path, "time.column", "expected the name of the time column")
    unit = time.get("unit", "s")
    if unit not in TIME_UNITS:
        raise _refuse(path, "time.unit", f"expected one of {', '.join(TIME_UNITS)}, got {unit!r}")
    clock = time.get("clock", "pc")
    if clock not in CLOCKS:
        raise _refuse(path, "time.clock", f"expected one of {', '.join(CLOCKS)}, got {clock!r}")
    steps = time.get("steps", False)
    if not isinstance(steps, bool):
        raise _refuse(path, "time.steps", f"expected true or false, got {steps!r}")
    angle = table.get("units", {}).get("angle", "rad")
    if angle not in ANGLE_UNITS:
        raise _refuse(path, "units.angle", f"expected rad or deg, got {angle!r}")
    columns = {SIGNALS[k][0]: _joint_names(path, k, v)
               for k, v in table.get("columns", {}).items()}
    for key in REQUIRED_SIGNALS:
        if SIGNALS[key][0] not in columns:
            raise _refuse(path, f"columns.{key}", "required: the source columns of "
                          + ("joint positions" if key == "q" else "joint velocities"))
    return Mapping(path, time["column"], TIME_UNITS[unit], steps, clock, columns,
                   ANGLE_UNITS[angle], _run_constants(path, table.get("run", {})), text, table)


def _joint_names(path: Path, key: str, value: Any) -> tuple[str, ...]:
    """The 7 source names of one signal: a pattern with `{i}` (0..6) or `{j}` (1..7), a list
    of 7 names, or (for an .npz array of shape (n, 7)) one plain name, kept as 1 entry."""
    where = f"columns.{key}"
    if isinstance(value, list):
        if len(value) != JOINTS or not all(isinstance(v, str) and v for v in value):
            raise _refuse(path, where, f"expected a list of {JOINTS} column names, got {value!r}")
        if len(set(value)) != JOINTS:
            raise _refuse(path, where, f"the {JOINTS} names must differ, got {value!r}")
        return tuple(value)
    if not isinstance(value, str) or not value:
        raise _refuse(path, where, "expected a pattern with {i} (0..6) or {j} (1..7), or a "
                      f"list of {JOINTS} names, got {value!r}")
    if "{i}" in value or "{j}" in value:
        try:
            return tuple(value.format(i=j - 1, j=j) for j in range(1, JOINTS + 1))
        except (KeyError, IndexError, ValueError) as exc:
            raise _refuse(path, where, f"bad pattern {value!r}: only {{i}} and {{j}} may "
                          f"appear ({exc})") from None
    return (value,)  # one name: an (n, 7) array of an .npz (checked when the file is read)


def _run_constants(path: Path, run: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "controller" in run:
        c = run["controller"]
        code = CONTROLLERS.get(c) if isinstance(c, str) else c
        if not isinstance(code, int) or isinstance(code, bool) or code not in CONTROLLERS.values():
            raise _refuse(path, "run.controller", "expected one of " + ", ".join(
                f"{n} ({v})" for n, v in CONTROLLERS.items()) + f", got {c!r}")
        out["controller"] = code
    for key in ("kp", "kd"):
        if key in run:
            v = run[key]
            if (not isinstance(v, list) or len(v) != JOINTS
                    or not all(_is_number(x) and x >= 0 for x in v)):
                raise _refuse(path, f"run.{key}", f"expected a list of {JOINTS} numbers >= 0 "
                              f"({'N·m/rad' if key == 'kp' else 'N·m·s/rad'}), got {v!r}")
            out[key] = [float(x) for x in v]
    for key in ("payload_kg", "filter_alpha"):
        if key in run:
            if not _is_number(run[key]):
                raise _refuse(path, f"run.{key}", f"expected a number, got {run[key]!r}")
            out[key] = float(run[key])
    for key in ("robot", "run"):
        if key in run:
            if not isinstance(run[key], str):
                raise _refuse(path, f"run.{key}", f"expected a string id, got {run[key]!r}")
            out[key] = run[key]
    return out


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
