"""Standalone validator of a `joint_sysid_recording/v1` bundle directory.

Imports only the standard library, numpy and pyarrow (nothing of twinlake), so a consumer can
copy this one file: `python bundle_validate.py DIR` exits 0 when every check passes, else 1,
and prints one line per check. The bundle contract (columns, units, metadata keys) is defined
here and documented in docs/formats.md; the exporter (`export.py` beside it) writes to it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

SCHEMA = "joint_sysid_recording/v1"
JOINTS = 7
_J = range(1, JOINTS + 1)


def _joint(prefix: str, unit: str, meaning: str) -> list[tuple[str, str, str, str]]:
    return [(f"{prefix}{j}", unit, "float64", f"{meaning}, joint J{j}") for j in _J]


COLUMNS: list[tuple[str, str, str, str]] = (
    [("seq", "tick", "int64", "executed-callback counter of the source recording; +1 per tick"),
     ("t_s", "s", "float64", "host steady clock at capture (callback end) since the first "
      "frame of the source recording; NOT a state timestamp"),
     ("robot_time_s", "s", "float64", "robot clock (RobotState::time), not synchronised with t_s"),
     ("control_period_s", "s", "float64", "libfranka callback period (first may be 0)")]
    + _joint("q", "rad", "measured joint position")
    + _joint("dq", "rad/s", "measured joint velocity")
    + _joint("tau_J", "N*m", "measured link-side joint torque (torque sensor)")
    + _joint("tau_cmd", "N*m", "commanded torque after the 1 N*m/tick slew limiter, gravity "
             "excluded, Coriolis included")
    + _joint("q_target", "rad", "joint target before this tick's EMA")
    + _joint("q_target_filtered", "rad", "joint target after this tick's EMA (spring term)")
    + _joint("K_joint", "N*m/rad", "applied stiffness")
    + _joint("D_joint", "N*m*s/rad", "applied damping (acts on -D*dq)")
    + [("filter_alpha", "1", "float64", "applied EMA coefficient per tick"),
       ("joint_use_friction", "bool", "int64", "applied friction-compensation flag (0/1)"),
       ("joint_reset_count", "count", "int64", "lifetime joint-controller reset counter"),
       ("controller", "enum", "int64", "fr3_stack ControllerType (2 = joint impedance)"),
       ("joint_target_valid", "bool", "int64", "1 = joint target columns are valid")]
    + [(f"ee_p{a}", "m", "float64", f"measured EE position {a} (base frame, O_T_EE)")
       for a in "xyz"]
    + [(f"ee_q{a}", "1", "float64", f"measured EE orientation quaternion {a} (xyzw order)")
       for a in "xyzw"]
)
"""samples.csv columns in order: (name, unit, dtype, meaning)."""

UNITS = frozenset(u for _, u, _, _ in COLUMNS)
NULLABLE = frozenset({"tau_J1", "tau_J2", "tau_J3", "tau_J4", "tau_J5", "tau_J6", "tau_J7",
                      "robot_time_s", "ee_px", "ee_py", "ee_pz", "ee_qx", "ee_qy", "ee_qz",
                      "ee_qw"})
"""Columns a source may not have recorded (empty cell = null); every other cell is required."""

METADATA_KEYS = ("schema", "exporter", "source", "selection", "samples", "joint_mapping",
                 "conventions", "controller", "timing", "payload", "provenance", "checks")
CONSTANT_COLUMNS = tuple(f"K_joint{j}" for j in _J) + tuple(f"D_joint{j}" for j in _J) + (
    "filter_alpha", "joint_use_friction", "joint_reset_count", "controller", "joint_target_valid")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Report:
    """Checks run on a bundle: (name, passed, detail) in order."""

    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append((name, bool(passed), detail))
        return bool(passed)

    @property
    def ok(self) -> bool:
        return all(p for _, p, _ in self.checks)

    def lines(self) -> list[str]:
        return [f"{'PASS' if p else 'FAIL'} {n}" + (f": {d}" if d else "")
                for n, p, d in self.checks]

    def as_dict(self) -> dict:
        return {"ok": self.ok, "checks": [{"name": n, "passed": p, "detail": d}
                                           for n, p, d in self.checks]}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _load_metadata(directory: Path, rep: Report) -> dict | None:
    path = directory / "metadata.json"
    if not rep.add("metadata.json present", path.is_file()):
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        rep.add("metadata.json parses", False, str(exc))
        return None
    if not rep.add("metadata.json is an object", isinstance(meta, dict)):
        return None
    rep.add("schema", meta.get("schema") == SCHEMA, f"{meta.get('schema')!r}, expected {SCHEMA!r}")
    missing = [k for k in METADATA_KEYS if k not in meta]
    rep.add("metadata keys", not missing, f"missing {missing}" if missing else "all present")
    return meta


def _check_metadata_columns(meta: dict, rep: Report) -> list[str] | None:
    cols = (meta.get("samples") or {}).get("columns")
    if not rep.add("samples.columns listed", isinstance(cols, list) and cols, ""):
        return None
    names = [c.get("name") for c in cols]
    expected = [c[0] for c in COLUMNS]
    rep.add("column list", names == expected,
            "matches the v1 column list" if names == expected else
            f"got {names[:6]}..., expected {expected[:6]}...")
    want = {c[0]: c[1] for c in COLUMNS}
    bad = [f"{c.get('name')}={c.get('unit')!r}" for c in cols
           if c.get("name") in want and c.get("unit") != want[c.get("name")]]
    rep.add("column units", not bad, f"wrong: {bad[:5]}" if bad else "SI, as declared")
    return names


def _check_hashes(directory: Path, meta: dict, rep: Report) -> None:
    samples = meta.get("samples") or {}
    path = directory / str(samples.get("file", "samples.csv"))
    if not rep.add("samples.csv present", path.is_file(), str(path.name)):
        return
    got = _sha256(path)
    rep.add("samples.csv sha256", got == samples.get("sha256"),
            got if got == samples.get("sha256") else f"{got} != {samples.get('sha256')}")
    raw = (meta.get("source") or {}).get("raw_files") or []
    bad = [r.get("name") for r in raw if not _HEX64.match(str(r.get("sha256", "")))]
    rep.add("original file hashes", bool(raw) and not bad,
            f"{len(raw)} file(s) with SHA-256" if raw and not bad else f"missing/bad: {bad or 'none listed'}")


def _read_samples(path: Path, rep: Report) -> pa.Table | None:
    types = {name: (pa.int64() if dtype == "int64" else pa.float64())
             for name, _, dtype, _ in COLUMNS}
    data = path.read_bytes()
    header = data.split(b"\n", 1)[0].decode("utf-8", "replace").split(",")
    if not rep.add("samples.csv header", header == [c[0] for c in COLUMNS],
                   "matches" if header == [c[0] for c in COLUMNS] else f"got {header[:6]}..."):
        return None
    try:
        table = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
            column_types=types, null_values=[""], strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        rep.add("samples.csv parses", False, str(exc))
        return None
    rep.add("samples.csv parses", True, f"{table.num_rows} rows")
    return table


def _check_rows(table: pa.Table, meta: dict, rep: Report) -> None:
    samples, sel = meta.get("samples") or {}, meta.get("selection") or {}
    rep.add("row count", table.num_rows == samples.get("rows") and table.num_rows > 0,
            f"{table.num_rows} rows, metadata says {samples.get('rows')}")
    if table.num_rows == 0:
        return
    seq = table["seq"].to_numpy(zero_copy_only=False)
    step = np.diff(seq)
    rep.add("seq monotonic, no gaps", seq.size > 0 and bool(np.all(step == 1)),
            "+1 every row" if np.all(step == 1) else
            f"{int(np.sum(step != 1))} breaks, first after seq {int(seq[np.argmax(step != 1)])}")
    rep.add("seq range", seq.size > 0 and int(seq[0]) == sel.get("seq_first")
            and int(seq[-1]) == sel.get("seq_last"),
            f"{int(seq[0]) if seq.size else None}..{int(seq[-1]) if seq.size else None}")
    t = table["t_s"].to_numpy(zero_copy_only=False)
    rep.add("t_s non-decreasing", bool(np.all(np.diff(t) >= 0)), "")
    bad = []
    for name, _, _, _ in COLUMNS:
        col = table[name]
        if name not in NULLABLE and col.null_count:
            bad.append(f"{name}: {col.null_count} empty")
        values = col.to_numpy(zero_copy_only=False).astype(np.float64)
        if np.any(~np.isfinite(values[~np.isnan(values)] if name in NULLABLE else values)):
            bad.append(f"{name}: non-finite")
    rep.add("required values present and finite", not bad, "; ".join(bad[:5]))
    _check_constants(table, meta, rep)
    quat = np.column_stack([table[f"ee_q{a}"].to_numpy(zero_copy_only=False) for a in "xyzw"])
    norm = np.linalg.norm(quat.astype(np.float64), axis=1)
    ok = np.isnan(norm) | (np.abs(norm - 1.0) < 1e-3)
    rep.add("EE quaternion unit norm (xyzw)", bool(np.all(ok)), f"{int(np.sum(~ok))} rows off")


def _check_constants(table: pa.Table, meta: dict, rep: Report) -> None:
    ctrl = meta.get("controller") or {}
    changing = [c for c in CONSTANT_COLUMNS if pc.count_distinct(table[c]).as_py() > 1]
    rep.add("one controller configuration", not changing,
            "constant K, D, alpha, friction, reset count, controller" if not changing
            else f"changes in {changing[:5]}")
    c_vals = table["controller"].to_numpy(zero_copy_only=False)
    v_vals = table["joint_target_valid"].to_numpy(zero_copy_only=False)
    rep.add("joint impedance throughout", bool(np.all(c_vals == 2) and np.all(v_vals == 1)), "")
    k = [float(table[f"K_joint{j}"][0].as_py()) for j in _J]
    d = [float(table[f"D_joint{j}"][0].as_py()) for j in _J]
    rep.add("gains match metadata", k == ctrl.get("K_joint") and d == ctrl.get("D_joint")
            and float(table["filter_alpha"][0].as_py()) == ctrl.get("filter_alpha"),
            f"K={k} D={d}")


def validate_bundle(directory: str | Path) -> Report:
    """Run every check on the bundle in `directory`; never raises for bad content."""
    directory = Path(directory)
    rep = Report()
    if not rep.add("bundle directory", directory.is_dir(), "" if directory.is_dir() else
                   f"{directory} is not a directory"):
        return rep
    try:
        _validate(directory, rep)
    except Exception as exc:  # malformed metadata must give a report, never a traceback
        rep.add("bundle readable", False, f"{type(exc).__name__}: {exc}")
    return rep


def _validate(directory: Path, rep: Report) -> None:
    meta = _load_metadata(directory, rep)
    if meta is None:
        return
    _check_metadata_columns(meta, rep)
    _check_hashes(directory, meta, rep)
    rep.add("report.md present", (directory / "report.md").is_file(), "")
    path = directory / str((meta.get("samples") or {}).get("file", "samples.csv"))
    if path.is_file():
        table = _read_samples(path, rep)
        if table is not None:
            _check_rows(table, meta, rep)


def main(argv: list[str] | None = None) -> int:
    """`python bundle_validate.py DIR [--json]`: exit 0 if the bundle passes, else 1."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    if len(args) != 1:
        print("usage: bundle_validate.py DIR [--json]", file=sys.stderr)
        return 2
    rep = validate_bundle(args[0])
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2))
    else:
        print("\n".join(rep.lines()))
        print(f"{'VALID' if rep.ok else 'INVALID'}: {args[0]}")
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
