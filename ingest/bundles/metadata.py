"""`metadata.json` and `report.md` of a `joint_sysid_recording/v1` bundle.

Every key is documented in docs/formats.md. Values come from the lake run as recorded:
gains, filter and friction flag from the per-tick CSV v2 columns (applied, not requested),
payload and provenance from the companion metadata when present, null where unknown.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import __version__
from .bundle_validate import COLUMNS, SCHEMA

SUFFIX_NOTE = "fr3_stack CSV v2 suffix i (0-based) = bundle suffix i+1 = physical joint J(i+1)"


def _first(frames: pa.Table, name: str) -> Any:
    return frames[name][0].as_py() if frames.num_rows else None


def _stats(values: np.ndarray) -> dict[str, float | None]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {"min": None, "median": None, "mean": None, "max": None}
    return {"min": float(values.min()), "median": float(np.median(values)),
            "mean": float(values.mean()), "max": float(values.max())}


def controller_block(frames: pa.Table, friction_model: dict) -> dict[str, Any]:
    """Applied controller configuration (constant over the exported ticks)."""
    use_friction = bool(_first(frames, "joint_use_friction"))
    return {
        "type": "joint_impedance", "fr3_stack_enum": 2,
        "law": "tau = K*(ema(q_target) - q) - D*dq + coriolis + joint_limit_repulsion "
               "(+ friction compensation if use_friction), then 1 N*m/tick slew limit; "
               "gravity added downstream by FCI",
        "K_joint": [float(_first(frames, f"K_joint{j}")) for j in range(1, 8)],
        "D_joint": [float(_first(frames, f"D_joint{j}")) for j in range(1, 8)],
        "filter_alpha": float(_first(frames, "filter_alpha")),
        "use_friction": use_friction,
        "friction_compensation": friction_model if use_friction else None,
        "joint_reset_count": int(_first(frames, "joint_reset_count")),
        "slew_limit_nm_per_tick": 1.0,
        "gains_source": "applied values recorded on every tick (CSV v2 columns 62-77)",
    }


def timing_block(frames: pa.Table) -> dict[str, Any]:
    """Counts and clocks of the exported ticks (no resampling, nothing interpolated)."""
    t = frames["t_s"].to_numpy(zero_copy_only=False).astype(float)
    period = frames["control_period_s"].to_numpy(zero_copy_only=False).astype(float)
    rt = pc.drop_null(frames["robot_time_s"]).to_numpy().astype(float)
    return {
        "nominal_rate_hz": 1000.0, "ticks": frames.num_rows,
        "t_s_first": float(t[0]), "t_s_last": float(t[-1]),
        "t_s_span_s": float(t[-1] - t[0]),
        "t_s_step_s": _stats(np.diff(t)),
        "control_period_s": _stats(period[1:] if period.size > 1 else period),
        "robot_time_s_first": float(rt[0]) if rt.size else None,
        "robot_time_s_last": float(rt[-1]) if rt.size else None,
        "t_s_semantics": "host steady clock at capture (after compute and slew limit) since the "
                         "recording's first frame; not a state timestamp",
    }


def _metadata_json(run_row: dict) -> dict | None:
    text = run_row.get("metadata_json")
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def payload_block(run_row: dict, meta: dict | None) -> dict[str, Any]:
    """Payload as recorded (companion metadata / run row), null where unknown."""
    p = (meta or {}).get("payload")
    p = p if isinstance(p, dict) else {}
    return {"mass_kg": run_row.get("payload_kg") if run_row.get("payload_kg") is not None
            else p.get("mass_kg"), "com_m": p.get("com_m"), "inertia_kg_m2": p.get("inertia_kg_m2"),
            "source": "companion metadata" if p or run_row.get("payload_kg") is not None else None,
            "note": "null = not recorded; a configured zero load does not prove no payload"}


def build_metadata(frames: pa.Table, run_row: dict, robot: str, run: str, selection,
                   samples_sha256: str, checks: list[dict], friction_model: dict) -> dict:
    """The whole metadata.json object (key order fixed)."""
    meta = _metadata_json(run_row)
    raw = [{k: f.get(k) for k in ("name", "role", "sha256", "size_bytes")}
           for f in run_row.get("raw_files") or []]
    return {
        "schema": SCHEMA,
        "exporter": {"name": "twinlake", "version": __version__},
        "source": {"robot": robot, "run": run, "source_format": run_row.get("source_format"),
                   "source_version": run_row.get("source_version"),
                   "source_file": run_row.get("source_file"), "raw_sha256": run_row.get("raw_sha256"),
                   "raw_files": raw, "run_verdict": run_row.get("verdict"),
                   "run_flags": run_row.get("flags") or []},
        "selection": {"kind": selection.kind, "interval_index": selection.index,
                      "seq_first": selection.seq_first, "seq_last": selection.seq_last,
                      "start_reason": selection.start_reason, "end_reason": selection.end_reason,
                      "run_problems_waived": selection.waived},
        "samples": {"file": "samples.csv", "sha256": samples_sha256, "rows": frames.num_rows,
                    "delimiter": ",", "header": True, "null": "",
                    "float_format": "shortest round-trip decimal",
                    "columns": [{"name": n, "unit": u, "dtype": d, "meaning": m}
                                for n, u, d, m in COLUMNS]},
        "joint_mapping": [{"joint": f"J{j}", "bundle_suffix": j, "fr3_stack_csv_v2_suffix": j - 1,
                           "frankatwin_suffix": j, "sim_joint": f"fr3_joint{j}"} for j in range(1, 8)],
        "conventions": {"joint_suffixes": SUFFIX_NOTE, "quaternion_order": "xyzw",
                        "pose_frame": "robot base frame, O_T_EE", "units": "SI",
                        "torque_sign": "tau_cmd excludes gravity; tau_J is the link-side sensor",
                        "missing_ticks": "never interpolated; seq is contiguous in a bundle"},
        "controller": controller_block(frames, friction_model),
        "timing": timing_block(frames),
        "payload": payload_block(run_row, meta),
        "provenance": {"recording_id": run_row.get("recording_id"), "robot_id": run_row.get("robot_id"),
                       "complete": run_row.get("complete"),
                       "completion_confirmed": run_row.get("completion_confirmed"),
                       "status_written": run_row.get("status_written"),
                       "status_dropped": run_row.get("status_dropped"),
                       "status_error": run_row.get("status_error"),
                       "ingested_by": run_row.get("twinlake_version"), "companion_metadata": meta},
        "checks": checks,
    }


def report_md(meta: dict, validation_lines: list[str]) -> str:
    """report.md: what was checked and what was found, for a human."""
    src, sel, tim, ctl = meta["source"], meta["selection"], meta["timing"], meta["controller"]
    lines = [f"# {SCHEMA} export of {src['robot']}/{src['run']}", "",
             f"- source: `{src['source_file']}` ({src['source_format']} v{src['source_version']}), "
             f"SHA-256 `{src['raw_sha256']}`",
             f"- selection: {sel['kind']}"
             + (f" {sel['interval_index']} ({sel['start_reason']} → {sel['end_reason']})"
                if sel["kind"] == "interval" else "")
             + f", seq {sel['seq_first']}..{sel['seq_last']}, {tim['ticks']} ticks, "
             f"{tim['t_s_span_s']:.3f} s",
             f"- controller: joint impedance, K={ctl['K_joint']}, D={ctl['D_joint']}, "
             f"alpha={ctl['filter_alpha']}, friction compensation={ctl['use_friction']}",
             f"- payload mass: {meta['payload']['mass_kg']} (null = not recorded)", "",
             "## Checks before export", ""]
    lines += [f"- {'pass' if c['passed'] else 'FAIL'}: {c['name']}" + (f" — {c['detail']}"
              if c.get("detail") else "") for c in meta["checks"]]
    if sel["run_problems_waived"]:
        lines += ["", "## Run problems outside the selected interval", ""]
        lines += [f"- {p}" for p in sel["run_problems_waived"]]
    lines += ["", "## Bundle validation (bundle_validate.py)", ""]
    lines += [f"- {line}" for line in validation_lines]
    return "\n".join(lines) + "\n"
