"""Companion files beside a 1 kHz recording, read by `twinlake ingest` (docs/daemon.md).

`<stem>.status.json`: the 11-key recording status returned by stop.
`<stem>.meta.json`: experiment metadata: robot_id, source, controller gains as commanded,
payload (null: unknown, never a made-up zero), the excitation plan and anchor. It never names
the daemon's truth profile: the fitter must not see it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from .status import RecordingStatus

META_SCHEMA = "twinlake_recording_meta/v1"


def companion_paths(csv_path: str | Path) -> tuple[Path, Path]:
    """(`<stem>.status.json`, `<stem>.meta.json`) beside the CSV."""
    stem = Path(csv_path).with_suffix("")
    return Path(f"{stem}.status.json"), Path(f"{stem}.meta.json")


def recording_meta(*, robot_id: str | None, source: str, recording_id: str, gains: dict,
                   plan: dict | None, anchor_q_rad, reference: str | None = None,
                   created_at_utc: str | None = "now", **extra) -> dict:
    """The experiment metadata dict (JSON-ready); `created_at_utc=None` keeps it deterministic."""
    if created_at_utc == "now":
        created_at_utc = datetime.now(timezone.utc).isoformat()
    return {
        "schema": META_SCHEMA,
        "robot_id": robot_id,
        "source": source,
        "recording_id": recording_id,
        "created_at_utc": created_at_utc,
        "controller": "joint_impedance",
        "gains": gains,
        "payload": None,
        "plan": plan,
        "anchor_q_rad": None if anchor_q_rad is None else [float(x) for x in anchor_q_rad],
        "reference": reference,
        **extra,
    }


def write_companions(csv_path: str | Path, status: RecordingStatus, meta: dict) -> tuple[Path, Path]:
    """Write both companions (exclusive create) beside `csv_path`; returns their paths."""
    status_path, meta_path = companion_paths(csv_path)
    with open(status_path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(status.to_dict()) + "\n")
    with open(meta_path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(meta, indent=2, allow_nan=False) + "\n")
    return status_path, meta_path
