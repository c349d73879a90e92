"""FrankaTwin sidecar JSON (`schema_version` 2, real logs; 1, sim replays) → run fields.

Source: FrankaTwin's data-format docs and its sidecar writer (docs/formats.md). The sidecar of a real run names its
gains (`args.kp_pos/kp_ori/kd_pos/kd_ori`), `q_init`, the anchors, `abort`, `summary` and the
ring-log summary (`ring_log`); all of them become run fields, and the whole sidecar is kept
verbatim (`sidecar_json`, and the file under `raw/`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..source_io import dumps, try_json
from ..registry import IngestError

GAIN_KEYS = ("kp_pos", "kp_ori", "kd_pos", "kd_ori")
STALENESS_50HZ_MS = 10.0
"""Each 50 Hz row's state is 0-10 ms older than its nominal `t_s` (CHANGELOG 0.3.0)."""

SIM_CONTROLLER = "uw_franka_replay_python_sim"
TARGET_CONTROLLERS = ("multiband_excitation_target", "multiband_pos_only_target",
                      "v4_chirp_excitation_target")


def sidecar_candidates(csv_path: Path) -> list[Path]:
    """Where FrankaTwin puts a CSV's sidecar: `<stem>.json` (FrankaTwin's data-format page) or `<csv>.json`
    (`<ring_csv>.json`, as its code writes it)."""
    return [csv_path.with_suffix(".json"), csv_path.with_name(csv_path.name + ".json")]


def find_sidecar(csv_path: Path) -> tuple[Path | None, dict | None]:
    """The first candidate sidecar that parses as a JSON object with `schema_version`."""
    for cand in sidecar_candidates(csv_path):
        body = try_json(cand)
        if isinstance(body, dict) and "schema_version" in body:
            return cand, body
    return None, None


SIDECAR_MAX_BYTES = 1 << 22
"""A sidecar is a few kB; a larger JSON is not read as one during detection."""

LOG_SAVE_REMEDY = ("fetch the log again from the daemon with robot.log_save(path) "
                   "(FrankaTwin's remedy for a failed 1 kHz fetch, docs/troubleshooting.md), "
                   "then ingest the CSV it writes with this sidecar beside it")


def is_sidecar(body: Any) -> bool:
    """A FrankaTwin sidecar object: integer `schema_version`, a `controller` name, and
    `csv_path` (real logs, generated targets) or a `sim` block (sim replays)."""
    return (isinstance(body, dict) and isinstance(body.get("schema_version"), int)
            and isinstance(body.get("controller"), str) and ("csv_path" in body or "sim" in body))


def sidecar_alone(path: Path) -> dict | None:
    """`path` parsed as a FrankaTwin sidecar, or None. Cheap for other files: anything not
    starting with `{` or larger than `SIDECAR_MAX_BYTES` is not opened further."""
    with open(path, "rb") as fh:
        if fh.read(64).lstrip()[:1] != b"{" or path.stat().st_size > SIDECAR_MAX_BYTES:
            return None
    body = try_json(path)
    return body if is_sidecar(body) else None


def owner_csvs(sidecar: Path) -> list[Path]:
    """The recordings whose sidecar `sidecar` would be (the inverse of
    `sidecar_candidates`): `<csv>.json` → `<csv>`, `<stem>.json` → `<stem>.csv`."""
    if not sidecar.name.endswith(".json"):
        return []
    base = sidecar.name[: -len(".json")]
    owners = [sidecar.with_name(base)] if base.endswith(".csv") else []
    return owners + [sidecar.with_name(base + ".csv")]


def ring_log_failure(body: dict) -> tuple[str, str] | None:
    """`(field, what)` when the sidecar says the 1 kHz ring log was not saved: `save_error`
    (the fetch or the save failed; paths stay null), `error` (log_stop itself raised), or a
    `ring_log` block whose `path` is null. None otherwise (also without a `ring_log`)."""
    ring = body.get("ring_log")
    if not isinstance(ring, dict):
        return None
    for key in ("save_error", "error"):
        if ring.get(key):
            return f"ring_log.{key}", f"ring_log.{key} = {ring[key]!r}"
    if "path" in ring and ring["path"] is None:
        return "ring_log.path", "ring_log.path is null (the 1 kHz log was never written)"
    return None


def _floats(path: Path, body: dict, key: str, n: int | None) -> list[float] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or (n is not None and len(value) != n) or not all(
            isinstance(v, (int, float)) for v in value):
        want = f"a list of {n} numbers" if n else "a list of numbers"
        raise IngestError(path, f"expected {want}, got {value!r:.60}", field=key)
    return [float(v) for v in value]


def gains(path: Path, body: dict) -> dict[str, float | None]:
    """`kp_pos, kp_ori, kd_pos, kd_ori` from `args`. A missing `args` block or a missing or
    non-positive `kp_*` is an `IngestError` (replay needs the applied gains). A missing
    `kd_*` is null (FrankaTwin's consumers then use 2·√kp; we do not invent it)."""
    args = body.get("args")
    if not isinstance(args, dict):
        raise IngestError(path, "sidecar has no 'args' block: the applied gains kp_pos, kp_ori, "
                          "kd_pos, kd_ori are unknown", field="args")
    out: dict[str, float | None] = {}
    for key in GAIN_KEYS:
        value = args.get(key)
        if value is None and key.startswith("kd"):
            out[key] = None
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or (
                key.startswith("kp") and value <= 0):
            raise IngestError(path, f"expected a positive number, got {value!r}",
                              field=f"args.{key}")
        out[key] = float(value)
    return out


def real_run_fields(path: Path, body: dict) -> dict[str, Any]:
    """Run fields of a real-log sidecar (schema 2). Raises `IngestError` on a wrong
    `schema_version`, a missing `args` block or malformed arrays."""
    version = body.get("schema_version")
    if version != 2:
        raise IngestError(path, f"schema_version is {version!r}, expected 2", field="schema_version")
    args = body.get("args")
    fields: dict[str, Any] = {
        "source_version": 2,
        "sidecar_controller": body.get("controller"),
        "created_utc": body.get("created_utc"),
        **gains(path, body),
        "err_delta_pos_override": _opt_float(args.get("err_delta_pos_override")),
        "excitation_mode": args.get("mode"),
        "control_rate_hz": _opt_float(body.get("control_rate_hz")),
        "planned_duration_s": _opt_float(body.get("duration_s")),
        "num_samples_planned": body.get("num_samples"),
        "q_init": _floats(path, body, "q_init", 7),
        "x_anchor": _floats(path, body, "x_anchor", 3),
        "q_anchor_xyzw": _floats(path, body, "q_anchor_xyzw", 4),
        "args_json": dumps(args),
        "summary_json": None if body.get("summary") is None else dumps(body["summary"]),
        "sidecar_json": dumps(body),
    }
    fields.update(abort_fields(path, body.get("abort")))
    return fields


def abort_fields(path: Path, abort: Any) -> dict[str, Any]:
    """`abort` block → `abort_code, abort_name, abort_value, abort_time_s, aborted`."""
    if abort is None:
        return {"abort_code": None, "abort_name": None, "abort_value": None,
                "abort_time_s": None, "aborted": None}
    if not isinstance(abort, dict) or not isinstance(abort.get("code"), int):
        raise IngestError(path, f"expected {{code, name, value, time_s}}, got {abort!r:.60}",
                          field="abort")
    return {"abort_code": abort["code"], "abort_name": abort.get("name"),
            "abort_value": _opt_float(abort.get("value")),
            "abort_time_s": _opt_float(abort.get("time_s")), "aborted": abort["code"] != 0}


def sim_run_fields(path: Path, body: dict) -> dict[str, Any]:
    """Run fields of a sim-replay sidecar (schema 1): the `sim` block (engine, applied sysid
    parameters path, motor delay, ...) and `source`, `args`, `summary`, `ended_normally`."""
    sim = body.get("sim") if isinstance(body.get("sim"), dict) else {}
    source = body.get("source")
    return {
        "source_version": body.get("schema_version"),
        "sidecar_controller": body.get("controller"),
        "created_utc": body.get("created_utc"),
        "sim_engine": sim.get("engine"),
        "sim_sysid_params_path": sim.get("sysid_params_path"),
        "sim_motor_delay_steps": sim.get("sysid_motor_delay_steps"),
        "sim_json": dumps(sim),
        "sim_source_json": None if source is None else dumps(source),
        "args_json": None if body.get("args") is None else dumps(body["args"]),
        "summary_json": None if body.get("summary") is None else dumps(body["summary"]),
        "ended_normally": body.get("ended_normally"),
        "sidecar_json": dumps(body),
    }


def target_run_fields(path: Path, body: dict) -> dict[str, Any]:
    """Run fields of a generated-target sidecar: anchors and gains as recorded (the gain
    fields may be absent there; then null)."""
    args = body.get("args") if isinstance(body.get("args"), dict) else {}
    return {
        "source_version": body.get("schema_version"),
        "sidecar_controller": body.get("controller"),
        "created_utc": body.get("created_utc"),
        **{k: _opt_float(args.get(k)) for k in GAIN_KEYS},
        "q_init": _floats(path, body, "q_init", 7),
        "x_anchor": _floats(path, body, "x_anchor", 3),
        "q_anchor_xyzw": _floats(path, body, "q_anchor_xyzw", 4),
        "args_json": dumps(args),
        "sidecar_json": dumps(body),
    }


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
