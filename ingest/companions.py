"""Companion JSON files beside a recording: the recording status and experiment metadata.

Recognised by content, not by name: any `<stem>*.json` beside `<stem>.csv` (for example
`run001.status.json`, `run001_status.json`, `run001.meta.json`, `run001.json`) is read;
an object carrying the recording-stop keys (`complete`, `written`, `dropped`, ...) is the
status (fr3_stack's `fr3_stack/recording.py`, 11 keys); another object is experiment metadata
(`robot_id`, `payload`, `gains`, `source`, `plan`, ...).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .registry import IngestError, RawFile

STATUS_KEYS = ("recording_id", "path", "active", "ok", "finished", "complete", "written",
               "discarded", "dropped", "error", "error_code")
_STATUS_CORE = {"complete", "written", "dropped", "finished"}
MAX_JSON_BYTES = 1 << 20


@dataclass
class Companions:
    """What the companion files say (each None when absent)."""

    status: dict[str, Any] | None = None
    status_path: Path | None = None
    metadata: dict[str, Any] | None = None
    metadata_path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def robot_id(self) -> str | None:
        value = (self.metadata or {}).get("robot_id") or (self.metadata or {}).get("robot")
        return str(value) if value not in (None, "") else None

    @property
    def run_id(self) -> str | None:
        for source, key in ((self.status, "recording_id"), (self.metadata, "recording_id"),
                            (self.metadata, "run_id")):
            value = (source or {}).get(key)
            if isinstance(value, str) and value:
                return value
        return None

    @property
    def declared_run(self) -> str | None:
        """A run name the experiment metadata gives explicitly (`run_id`), else None."""
        value = (self.metadata or {}).get("run_id")
        return value if isinstance(value, str) and value else None

    def raw_files(self) -> list[RawFile]:
        files = []
        if self.status_path:
            files.append(RawFile(self.status_path, "status"))
        if self.metadata_path:
            files.append(RawFile(self.metadata_path, "metadata"))
        return files

    def run_fields(self) -> dict[str, Any]:
        """Values for run.parquet columns (completion is refined by the pipeline)."""
        out: dict[str, Any] = {"recording_id": self.run_id, "robot_id": self.robot_id,
                               "payload_kg": _payload_kg(self.metadata)}
        if self.metadata is not None:
            out["metadata_json"] = json.dumps(self.metadata, sort_keys=True)
            status = self.metadata.get("excitation_status")
            if isinstance(status, str):  # twinlake's recorder: the excitation's end state
                out.update(excitation_status=status, aborted=status in ABORTED_STATUSES)
        st = self.status
        if st is not None:
            out.update(complete=bool(st.get("complete")), status_written=_int(st, "written"),
                       status_discarded=_int(st, "discarded"),
                       status_dropped=_int(st, "dropped"), status_error=st.get("error") or "")
        return out


ABORTED_STATUSES = ("aborted", "failed")
"""`excitation_status` values of a run the client stopped before its plan ended."""


def _int(d: dict, key: str) -> int | None:
    value = d.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _payload_kg(meta: dict | None) -> float | None:
    payload = (meta or {}).get("payload")
    if isinstance(payload, dict):
        payload = payload.get("mass_kg", payload.get("mass"))
    if isinstance(payload, (int, float)) and not isinstance(payload, bool):
        value = float(payload)
        return value if math.isfinite(value) else None
    return None


def is_status(obj: Any) -> bool:
    """A recording-stop status object (has the core keys `complete`, `written`, ...)."""
    return isinstance(obj, dict) and _STATUS_CORE.issubset(obj)


def _load(path: Path) -> Any:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise IngestError(path, f"companion JSON larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise IngestError(path, f"companion file is not valid JSON: {exc}".split(": line")[0],
                          line=line, kind="companion") from None


def companion_candidates(recording: Path) -> list[Path]:
    """JSON files beside `recording` named `<stem>.json`, `<stem>.*.json`, `<stem>_*.json`
    or `<stem>-*.json` (`run001b.json` belongs to run001b, not run001)."""
    stem = recording.name.rsplit(".", 1)[0]
    found = []
    for path in sorted(recording.parent.glob(f"{_glob_escape(stem)}*.json")):
        if path.is_file() and path != recording and path.name[len(stem):][:1] in (".", "-", "_"):
            found.append(path)
    return found


def find_companions(recording: Path) -> Companions:
    """Read the companion JSON files beside `recording` and classify them by content."""
    comp = Companions()
    for path in companion_candidates(recording):
        obj = _load(path)
        if is_status(obj) and comp.status is None:
            comp.status, comp.status_path = obj, path
            _check_status_path(comp, recording)
        elif isinstance(obj, dict) and not is_status(obj) and comp.metadata is None:
            comp.metadata, comp.metadata_path = obj, path
    return comp


def _check_status_path(comp: Companions, recording: Path) -> None:
    named = comp.status.get("path") if comp.status else None
    if isinstance(named, str) and named and Path(named).name != recording.name:
        comp.notes.append(f"{comp.status_path.name}: ignored, its path names "
                          f"{Path(named).name}, not {recording.name}")
        comp.status, comp.status_path = None, None


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
