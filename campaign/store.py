"""A campaign on disk: `<lake>/campaigns/campaign=<id>/` (docs/campaigns.md, "On disk").

    campaign.json            the normalised campaign config (written once; its hash pins the id)
    campaign.parquet         one row: the config as columns (the `campaigns` view)
    episodes/<episode_id>/   episode_config.json, samples.parquet (unless --samples none), summary.json
    infrastructure_errors/<episode_id>_<ms>/   summary.json (+ episode_config.json) of a failed attempt
    summary.jsonl            append-only: one row per episode finished, per invocation (run_id column)
    summary.csv, summary.parquet   rebuilt from every episodes/*/summary.json, sorted by episode_id
    manifest_<run_id>.json   one per invocation: input hashes, environment, counts, wall times
    _tmp/                    episodes being written (`.tmp_<episode_id>_<pid>`), emptied at start

An episode directory is filled under `_tmp/`, its files fsynced, then renamed into
`episodes/` (one rename: a reader sees all of it or none of it). JSON: canonical form (sorted
keys, no NaN) for hashes; files are indented for reading.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog import Lake, check_id

SUMMARY_FIXED = ("episode_id", "index", "sample_index", "gains_id", "status", "outcome", "seed", "config_hash",
                 "abort_t_s", "abort_reason", "failure_category", "wall_total_s", "wall_sim_s", "run_id")
_STRINGS = {"episode_id", "gains_id", "status", "outcome", "config_hash", "abort_reason", "failure_category",
            "run_id", "controller"}
_INTS = {"index", "sample_index", "seed", "slew_saturated_ticks", "ticks", "motor_delay_ms"}
_BOOLS = {"torque_limit_exceeded"}


def canonical_json(obj) -> str:
    """Canonical JSON (sorted keys, compact, no NaN): what hashes are taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _replace_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def pretty_json(obj) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()


class CampaignStore:
    """The directory of one campaign."""

    def __init__(self, lake: Lake | str | Path, campaign_id: str):
        self.lake = lake if isinstance(lake, Lake) else Lake(Path(lake))
        self.campaign_id = check_id("campaign", campaign_id)
        self.root = self.lake.root / "campaigns" / f"campaign={self.campaign_id}"
        self.episodes_dir = self.root / "episodes"
        self.infra_dir = self.root / "infrastructure_errors"
        self.tmp_dir = self.root / "_tmp"

    # --- the campaign itself -------------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / "campaign.json").is_file()

    def read_config(self) -> dict:
        return json.loads((self.root / "campaign.json").read_text())

    def lock(self) -> None:
        """Hold the campaign's lock (`.lock`, flock) until this process exits or `unlock()`;
        ValueError when another process holds it (one invocation per campaign at a time). The
        kernel releases it when its holder dies, even by SIGKILL."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(f"campaign {self.campaign_id!r} is being run by another process (lock {self.root / '.lock'})") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def open(self, config: dict, row: dict) -> None:
        """Create the campaign (config + its one-row table), or check that `config` is the one
        it was created with (ValueError naming the differing keys otherwise); empty `_tmp/`."""
        if self.exists():
            old = self.read_config()
            if canonical_json(old) != canonical_json(config):
                keys = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
                raise ValueError(f"campaign {self.campaign_id!r} exists with a different configuration "
                                 f"(differs in: {', '.join(keys)}); use another --id")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist([row]), self.root / "campaign.parquet")
            _replace_atomic(self.root / "campaign.json", pretty_json(config))  # last: marks the campaign
        for d in (self.episodes_dir, self.infra_dir):
            d.mkdir(exist_ok=True)
        if self.tmp_dir.is_dir():
            shutil.rmtree(self.tmp_dir)  # what a killed invocation left half-written
        self.tmp_dir.mkdir()

    # --- episodes ------------------------------------------------------------------------
    def done(self) -> set[str]:
        """Episode ids whose directory is complete (published)."""
        if not self.episodes_dir.is_dir():
            return set()
        return {p.name for p in self.episodes_dir.iterdir() if (p / "summary.json").is_file()}

    def _publish(self, target: Path, name: str, files: dict[str, bytes], summary: dict) -> Path:
        summary = {**summary, "files": {fname: sha256_bytes(data) for fname, data in sorted(files.items())}}
        return self._publish_files(target, name, {**files, "summary.json": pretty_json(summary)})

    def adopt_episode(self, episode_id: str, files: dict[str, bytes]) -> Path | None:
        """Publish an episode directory written elsewhere (a worker that does not see this
        lake), file for file; None when the episode is published already."""
        if "/" in episode_id or episode_id.startswith("."):
            raise ValueError(f"episode id {episode_id!r} is not a directory name")
        target = self.episodes_dir / episode_id
        if (target / "summary.json").is_file():
            return None
        return self._publish_files(target, episode_id, files)

    def _publish_files(self, target: Path, name: str, files: dict[str, bytes]) -> Path:
        tmp = self.tmp_dir / f".tmp_{name}_{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for fname, data in files.items():
            _write_synced(tmp / fname, data)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, target)
        return target

    def write_episode(self, episode_id: str, config: dict, samples: bytes | None, summary: dict) -> Path:
        """Publish one finished episode atomically; FileExistsError-like OSError if it exists."""
        files = {"episode_config.json": pretty_json(config)}
        if samples is not None:
            files["samples.parquet"] = samples
        return self._publish(self.episodes_dir / episode_id, episode_id, files, summary)

    def write_infrastructure_error(self, episode_id: str, config: dict | None, summary: dict, ms: int) -> Path:
        """Keep a failed attempt apart (never in episodes/): `infrastructure_errors/<id>_<ms>/`."""
        files = {"episode_config.json": pretty_json(config)} if config is not None else {}
        self.infra_dir.mkdir(parents=True, exist_ok=True)
        return self._publish(self.infra_dir / f"{episode_id}_{ms}", f"{episode_id}_{ms}", files, summary)

    def infrastructure_errors(self) -> list[Path]:
        return sorted(p for p in self.infra_dir.iterdir() if (p / "summary.json").is_file()) \
            if self.infra_dir.is_dir() else []

    # --- run-level files -----------------------------------------------------------------
    def append_jsonl(self, rows: list[dict]) -> None:
        """Append rows to summary.jsonl in one write (a torn last line of a killed invocation is cut first)."""
        if not rows:
            return
        path = self.root / "summary.jsonl"
        _repair_tail(path)
        data = "".join(canonical_json(r) + "\n" for r in rows).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def summaries(self) -> list[dict]:
        """Every published episode's summary.json, sorted by episode id."""
        return [json.loads((self.episodes_dir / e / "summary.json").read_text()) for e in sorted(self.done())]

    def rebuild_tables(self) -> int:
        """Rewrite summary.csv and summary.parquet from all summary.json; returns the row count."""
        rows = [flat_row(s) for s in self.summaries()]
        columns = list(SUMMARY_FIXED) + sorted({k for r in rows for k in r} - set(SUMMARY_FIXED))
        table = pa.table({c: pa.array([r.get(c) for r in rows], type=_arrow_type(c)) for c in columns})
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        _replace_atomic(self.root / "summary.parquet", buf.getvalue().to_pybytes())
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow(["" if r.get(c) is None else repr(r[c]) if isinstance(r.get(c), float) else r[c]
                             for c in columns])
        _replace_atomic(self.root / "summary.csv", text.getvalue().encode())
        return len(rows)

    def write_manifest(self, run_id: str, manifest: dict) -> Path:
        path = self.root / f"manifest_{run_id}.json"
        _replace_atomic(path, pretty_json(manifest))
        return path


def _repair_tail(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = fh.seek(0) or fh.read()
        fh.truncate(data.rfind(b"\n") + 1)


def _arrow_type(column: str) -> pa.DataType:
    if column in _STRINGS:
        return pa.string()
    if column in _INTS:
        return pa.int64()
    if column in _BOOLS:
        return pa.bool_()
    return pa.float64()


def flat_row(summary: dict) -> dict:
    """One summary row: the fixed keys, the metrics, the parameters by name and the gains."""
    row = {k: summary.get(k) for k in SUMMARY_FIXED if k in summary}
    row["failure_category"] = (summary.get("failure") or {}).get("category")
    wall = summary.get("wall") or {}
    row["wall_total_s"], row["wall_sim_s"] = wall.get("total_s"), wall.get("sim_s")
    row.update(summary.get("metrics") or {})
    row.update(summary.get("parameters") or {})
    row.update(summary.get("gains_columns") or {})
    row["controller"] = summary.get("controller")
    return row


__all__ = ["CampaignStore", "SUMMARY_FIXED", "canonical_json", "flat_row", "pretty_json", "sha256_bytes",
           "sha256_text"]
