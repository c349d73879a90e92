"""TestRandomization episode directory (`tr-c1-episode/1`, TestRandomization's runner) → one run.

Files: `episode_config.json`, `ticks.csv.gz` (10 Hz controller ticks), `state100.csv.gz`
(100 Hz true state), `summary.json` (outcome, metrics, file hashes), `server_stderr.txt`, and
the optional `mpc_diag.csv.gz`, `obs_noise.csv.gz`. The episode is a run of robot `vehicle`
(or the config's vehicle name). Frames are the ticks (`seq` = `tick`, `t_s` = `t`, every
other column kept under its own name; the arm's canonical columns are null). `state100`,
`mpc_diag` and `obs_noise` become extra tables. The hashes in `summary.json["files"]` are
verified before anything is read further; a mismatch rejects the episode (quarantine).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..canonical import conform_frames
from ..source_io import (SOURCE_FIELDS_TABLE, dumps,
                                           load_json, read_bytes, read_typed_csv,
                                           source_fields_table, try_json)
from ..registry import (Detection, IngestError, IngestUnit, RawFile, ReadOptions,
                                      register)

REQUIRED = ("episode_config.json", "ticks.csv.gz", "state100.csv.gz", "summary.json")
OPTIONAL = ("mpc_diag.csv.gz", "obs_noise.csv.gz", "server_stderr.txt")
TABLES = {"state100.csv.gz": "state100", "mpc_diag.csv.gz": "mpc_diag",
          "obs_noise.csv.gz": "obs_noise"}
INT_COLS = ("tick", "step", "obs_pub_step", "obs_age_steps", "apply_step", "solve_index",
            "nearest_idx", "progress_idx", "idx_lookahead", "idx_track")
DEFAULT_ROBOT = "vehicle"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_for_key(directory: Path, key: str) -> Path | None:
    """The episode file a `summary.files` key names: the exact name, else the file whose
    name starts with the key (`ticks` → `ticks.csv.gz`), ignoring a `_csv`/`_sha256` suffix."""
    if (directory / key).is_file():
        return directory / key
    stem = key
    for suffix in ("_sha256", "_csv", "_csv_gz"):
        stem = stem.removesuffix(suffix)
    for name in REQUIRED + OPTIONAL:
        if name.split(".")[0] == stem:
            return directory / name
    return None


def verify_hashes(directory: Path, summary: dict) -> tuple[dict[str, str], list[str]]:
    """Check every `summary.files` hash against the file's bytes (the gz bytes, or else the
    decompressed CSV text). Returns `(name → basis)` and flags; raises on a mismatch."""
    files = summary.get("files")
    if not isinstance(files, dict) or not files:
        raise IngestError(directory / "summary.json", "no 'files' hashes to verify", field="files",
                          kind="hash_mismatch")
    basis: dict[str, str] = {}
    for key, want in files.items():
        path = _file_for_key(directory, key)
        if path is None or not path.is_file():
            raise IngestError(directory / "summary.json", f"lists a hash for {key!r} but the "
                              "file is missing", field=f"files.{key}", kind="missing")
        data = path.read_bytes()
        if _sha(data) == want:
            basis[path.name] = "file_bytes"
        elif path.name.endswith(".gz") and _sha(_decompressed_or_empty(path)) == want:
            basis[path.name] = "decompressed_bytes"
        else:
            raise IngestError(path, f"SHA-256 {_sha(data)[:16]}… does not match summary.json "
                              f"files.{key} = {str(want)[:16]}…", kind="hash_mismatch")
    return basis, []


def _decompressed_or_empty(path: Path) -> bytes:
    try:
        return read_bytes(path)
    except IngestError:
        return b""  # a corrupt stream cannot match; the hash mismatch is the error


def config_hash_matches(config_path: Path, want: Any) -> bool | None:
    """`config_hash` is "SHA256 over canonical JSON" (TestRandomization's log schema; canonical form unstated): we
    accept sorted-keys JSON, compact or with default separators, or the file bytes."""
    if not isinstance(want, str):
        return None
    obj = json.loads(config_path.read_text())
    forms = [json.dumps(obj, sort_keys=True, separators=(",", ":")),
             json.dumps(obj, sort_keys=True), json.dumps(obj, sort_keys=True, indent=2)]
    digests = {_sha(f.encode()) for f in forms} | {_sha(config_path.read_bytes())}
    return want in digests


def _table(path: Path) -> pa.Table:
    data = read_bytes(path)
    header = data.split(b"\n", 1)[0].decode("utf-8", "replace").split(",")
    types = {c: pa.int64() for c in INT_COLS if c in header}
    return read_typed_csv(path, types, data=data)


def _robot(config: dict) -> str:
    vehicle = config.get("vehicle")
    if isinstance(vehicle, dict) and isinstance(vehicle.get("name"), str):
        return vehicle["name"]
    if isinstance(vehicle, str):
        return vehicle
    return DEFAULT_ROBOT


def summary_fields(summary: dict) -> dict[str, Any]:
    """`outcome`, `episode_status` and each top-level numeric summary value as `metric_<key>`."""
    fields: dict[str, Any] = {"outcome": summary.get("outcome"),
                              "episode_status": summary.get("status")}
    for key, value in summary.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            fields[f"metric_{key}"] = float(value)
    return fields


class EpisodeReader:
    """A `tr-c1-episode/1` episode directory (matched as a directory)."""

    name = "tr_episode"

    def detect(self, path: Path) -> Detection:
        if not path.is_dir():
            return Detection.no("not a directory")
        missing = [n for n in ("episode_config.json", "summary.json") if not (path / n).is_file()]
        if missing:
            return Detection.no(f"no {' / '.join(missing)} in the directory")
        if not isinstance(try_json(path / "summary.json"), dict):
            return Detection.no("summary.json is not a JSON object")
        return Detection(True, "episode_config.json + summary.json (tr-c1-episode/1)", version=1)

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        missing = [n for n in REQUIRED if not (path / n).is_file()]
        if missing:
            raise IngestError(path / missing[0], f"episode file {missing[0]} is missing",
                              kind="missing")
        config = load_json(path / "episode_config.json")
        summary = load_json(path / "summary.json")
        basis, flags = verify_hashes(path, summary)
        notes: list[str] = []
        cfg_ok = config_hash_matches(path / "episode_config.json", summary.get("config_hash"))
        if cfg_ok is False:
            flags.append("config_hash_unverified")
            notes.append("config_hash matches no canonical JSON form of episode_config.json")
        ticks = _table(path / "ticks.csv.gz")
        frames = ticks.rename_columns([{"tick": "seq", "t": "t_s"}.get(c, c)
                                       for c in ticks.column_names])
        n = frames.num_rows
        frames = frames.append_column("schema_version", pa.array([1] * n, pa.int32()))
        extra = {TABLES[n_]: _table(path / n_) for n_ in TABLES if (path / n_).is_file()}
        raw = [RawFile(path / "ticks.csv.gz", "recording"),
               RawFile(path / "state100.csv.gz", "state100"),
               RawFile(path / "summary.json", "summary"),
               RawFile(path / "episode_config.json", "config")]
        raw += [RawFile(path / n_, n_.split(".")[0]) for n_ in OPTIONAL if (path / n_).is_file()]
        fields = {"source_format": self.name, "source_version": 1, "fit_eligible": False,
                  "source_kind": "sim", "complete": summary.get("status") == "ok",
                  **summary_fields(summary), "hashes_verified": True,
                  "hash_basis_json": dumps(basis), "config_hash_verified": cfg_ok,
                  "summary_json": dumps(summary), "metadata_json": dumps(config)}
        robot = _robot(config)  # a vehicle, never the --robot arm id
        extra[SOURCE_FIELDS_TABLE] = source_fields_table(fields)
        return IngestUnit(robot=robot, run=options.run or path.name, frames=conform_frames(frames),
                          raw_files=raw, run_fields=fields, extra_tables=extra, flags=flags,
                          reasons=notes)


register(EpisodeReader())
