"""The replay of a lake run (`twinlake sim replay`): one clean interval of a run from the
catalog, replayed with one parameter set by sim's reference engine, written in FrankaTwin's
sim-CSV layout + sidecar.

It joins the catalog (which run, which interval, its frames) to the simulation, which knows
nothing of the lake.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .catalog import IntervalFrames, interval_frames
from .sim import (CARTESIAN_IMPEDANCE, FR3_MODEL_PATH, TIME_BASE_ZOH, CartesianGains, DynamicsParams,
                          ReplayInput, ReplayResult, load_model, load_params, replay_reference)
from .sim.replay.replay_input import TIME_BASE_TICKS
from .sim.replay.sim_csv import sim_sidecar, write_sidecar, write_sim_csv

ZOH_RATE_BELOW_HZ = 500.0  # runs logged slower than this are replayed on FrankaTwin's ZOH time base


def _metadata(run_row: dict) -> dict:
    try:
        meta = json.loads(run_row.get("metadata_json") or "{}")
    except json.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def build_input(data: IntervalFrames, use_ema: bool = True) -> ReplayInput:
    """The ReplayInput of an interval: joint impedance per tick; Cartesian per tick (1 kHz) or
    on FrankaTwin's ZOH time base (slower logs), gains from the run's metadata `args`."""
    controller = int(data.interval["controller"])
    if controller == 2:
        return ReplayInput.from_frames(data.frames, controller="joint_impedance", use_ema=use_ema)
    if controller != 1:
        raise ValueError(f"interval {data.interval['interval_index']}: controller {controller} "
                         "cannot be replayed (joint impedance 2 or Cartesian 1 only)")
    meta = _metadata(data.run_row)
    args = meta.get("args", {}) if isinstance(meta.get("args"), dict) else {}
    gains = CartesianGains(**{k: float(args[k]) for k in ("kp_pos", "kp_ori", "kd_pos", "kd_ori")
                              if isinstance(args.get(k), (int, float))})
    rate = data.run_row.get("rate_hz") or 1000.0
    if rate < ZOH_RATE_BELOW_HZ:
        q_init = meta.get("q_init")
        return ReplayInput.from_frames(data.frames, controller=CARTESIAN_IMPEDANCE, time_base=TIME_BASE_ZOH,
                                       cartesian=gains, q_init=np.asarray(q_init) if q_init else None)
    return ReplayInput.from_frames(data.frames, controller=CARTESIAN_IMPEDANCE, time_base=TIME_BASE_TICKS,
                                   cartesian=gains)


def run_replay(lake, run: str, out_dir: Path, *, interval: int | None = None, params_path: Path | None = None,
               model_path: Path | None = None, joint_map: dict[int, str] | None = None, use_ema: bool = True,
               progress=None) -> dict:
    """Replay and write `<run>_i<interval>_sim.csv` and `.json` into out_dir; returns a summary."""
    params = load_params(params_path) if params_path else DynamicsParams.nominal()
    model = load_model(model_path, joint_map=joint_map)
    data = interval_frames(lake, run, interval)
    inp = build_input(data, use_ema=use_ema)
    if progress is not None:
        progress(0, inp.n_ticks)
    result: ReplayResult = replay_reference(inp, params, model,
                                            progress=None if progress is None else lambda k: progress(k, inp.n_ticks))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{data.run}_i{int(data.interval['interval_index'])}_sim"
    csv_path = write_sim_csv(out_dir / f"{stem}.csv", inp, result)
    source = {
        "lake": str(lake), "robot": data.robot, "run": data.run,
        "interval_index": int(data.interval["interval_index"]),
        "seq_first": int(data.interval["seq_first"]), "seq_last": int(data.interval["seq_last"]),
        "source_format": data.run_row.get("source_format"), "raw_sha256": data.run_row.get("raw_sha256"),
        "replayed_from_row": int(inp.source_rows[0]) if inp.source_rows is not None and len(inp.source_rows) else 0,
    }
    sidecar = sim_sidecar(inp, result, source=source, model_path=str(model_path or FR3_MODEL_PATH),
                          params_path=str(params_path) if params_path else None,
                          params=params)
    side_path = write_sidecar(out_dir / f"{stem}.json", sidecar)
    return {"csv": str(csv_path), "sidecar": str(side_path), "robot": data.robot, "run": data.run,
            "interval_index": source["interval_index"], "samples": int(result.q.shape[0]),
            "ticks": int(inp.n_ticks), "q_rmse_vs_recording_rad": sidecar["summary"]["q_rmse_vs_recording_rad"]}


__all__ = ["build_input", "run_replay"]
