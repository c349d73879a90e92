"""One input's ingest: detect → read → validate → (already ingested? refuse?) → publish, or
quarantine; the same step for every source format, serial or in a Ray task.

`ingest_runs` ingests one input (one Outcome per run it holds, a bag of two arms being two),
`ingest_one` one run. Which inputs there are and in which order they are told is the plan's
(ingest/plan.py); who runs them is an executor's (ingest/execute.py `ingest_paths` here,
ingest/fanout.py on Ray).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..catalog import (
    RUN_SCHEMA,
    Lake,
    PartitionExists,
    check_id,
    prepare_run_intervals,
    publish_partition,
    published_file,
    stage_run_intervals,
)
from .outcome import Outcome, rejected
from .registry import IngestError, IngestUnit, ReadOptions, SourceReader
from .rawstore import DEFAULT_RAW_CODEC, RawStore, adopt_ahead
from .runstats import flags_for, frame_stats, verdict_for
from .frame_stream import (
    PARQUET_COMPRESSION,
    ROW_GROUP_ROWS,
    ingest_allocations,
    stream_frames,
    write_chunks,
)


def ingest_runs(lake: Lake, path: Path, reader: SourceReader, options: ReadOptions, *,
                replace: bool = False, raw_codec: str = DEFAULT_RAW_CODEC) -> list[Outcome]:
    """One Outcome per run the input holds: `ingest_one` for each ReadOptions of the reader's
    `run_selections` (a bag of two arms), else for `options`."""
    select = getattr(reader, "run_selections", None)
    if select is None:
        return [ingest_one(lake, path, reader, options, replace=replace, raw_codec=raw_codec)]
    try:
        chosen = select(path, options)
    except IngestError as err:
        return [rejected(lake, path, err, reader.name)]
    except Exception as exc:  # a library's error the reader did not foresee: still one line
        return [rejected(lake, path, unforeseen(path, exc), reader.name)]
    return [ingest_one(lake, path, reader, o, replace=replace, raw_codec=raw_codec)
            for o in chosen]


def ingest_one(lake: Lake, path: Path, reader: SourceReader, options: ReadOptions, *,
               replace: bool = False, raw_codec: str = DEFAULT_RAW_CODEC) -> Outcome:
    """Read, validate and publish one input; never raises for bad data."""
    with ingest_allocations():
        raw = adopt_ahead(lake, path, raw_codec) or RawStore(lake, raw_codec)
        warming = prepare_run_intervals()
        try:
            if path.is_file() and not raw.started:
                raw.start_primary(path)
            return _ingest(lake, path, reader, options, replace, raw)
        except Exception as exc:  # IngestError, or a library's error the reader did not foresee
            err = exc if isinstance(exc, IngestError) else unforeseen(path, exc)
            return rejected(lake, path, err, reader.name,
                            [Path(options.mapping)] if options.mapping is not None else [])
        finally:
            raw.discard()
            warming.join()


def unforeseen(path: Path, exc: BaseException) -> IngestError:
    """An error no reader check named (a library's own, on input it did not expect) as a
    one-line IngestError naming the file and the library's words: the input is quarantined
    and the next one ingested, never a traceback."""
    text = str(exc).strip().splitlines()
    return IngestError(path, f"cannot be read: {type(exc).__name__}: "
                       f"{text[0] if text else '(no message)'}", kind="unforeseen")


def _ingest(lake: Lake, path: Path, reader: SourceReader, options: ReadOptions,
            replace: bool, raw: RawStore) -> Outcome:
    unit = reader.read(path, options)
    naming_error = _check_names(path, reader, unit)
    if naming_error is not None:
        return naming_error
    # grid, stale flags, validation, statistics and frames.parquet, a chunk at a time (the
    # Parquet writer's thread and the archive's overlap the checks)
    stats = stream_frames(path, unit, raw.dir / "frames.parquet")
    raw.sync_in_background("frames.parquet")
    for name, chunks in unit.extra_chunks.items():
        write_chunks(chunks, raw.dir / f"{name}.parquet")
        raw.sync_in_background(f"{name}.parquet")
    for f in unit.raw_files:
        if f.path.is_file():
            raw.add(f.path, f.role)
    # a directory, or a file read through a mapping: "the same bytes" is every kept file
    row = run_row(unit, raw.wait(), manifest_hash=path.is_dir() or options.mapping is not None,
                  stats=stats)
    base = Outcome(str(path), "published", "", format=reader.name, robot=unit.robot,
                   run=unit.run, frame_count=stats["frame_count"], verdict=row["verdict"],
                   flags=row["flags"], files=[str(f.path) for f in unit.raw_files])
    return _publish(lake, path, unit, row, raw, base, replace)


def _check_names(path: Path, reader: SourceReader, unit: IngestUnit) -> Outcome | None:
    """An `error` Outcome if the unit has no robot or an unusable robot/run id."""
    if unit.robot is None:
        return Outcome(str(path), "error", f"{path.name}: no robot named: pass --robot ID, or "
                       f"put \"robot_id\" in a {path.with_suffix('').name}.meta.json beside it",
                       format=reader.name, run=unit.run)
    try:
        check_id("robot", unit.robot)
        check_id("run", unit.run)
    except ValueError as exc:
        return Outcome(str(path), "error", f"{path.name}: {exc} (name it with --robot/--run)",
                       format=reader.name)
    return None


def _publish(lake: Lake, path: Path, unit: IngestUnit, row: dict, raw: RawStore,
             base: Outcome, replace: bool) -> Outcome:
    """No-op for the same bytes, refuse different bytes unless `replace`, else publish."""
    rel = lake.run_relative(unit.robot, unit.run)
    target = lake.shown(rel)
    same = f"{path.name}: already ingested as {unit.robot}/{unit.run} (same bytes)"
    existing = _existing_sha(lake, rel)
    if existing is not None and existing == row["raw_sha256"]:
        return _with(base, "already_ingested", same, target)
    if existing is not None and not replace:
        return _refused(base, path, unit, target)
    try:
        publish_partition(lake, rel, lambda d: _write(lake, d, unit, row, raw), replace=replace)
    except PartitionExists:  # another process won the race
        if _existing_sha(lake, rel) == row["raw_sha256"]:
            return _with(base, "already_ingested", same, target)
        return _refused(base, path, unit, target)
    status = "replaced" if existing is not None else "published"
    flags = f" ({', '.join(row['flags'])})" if row["flags"] else ""
    return _with(base, status, f"{path.name}: {status} {unit.robot}/{unit.run}: "
                 f"{row['frame_count']} frames, verdict {row['verdict']}{flags}", target)


def _with(base: Outcome, status: str, message: str, partition: Path | str) -> Outcome:
    base.status, base.message, base.partition = status, message, str(partition)
    return base


def _refused(base: Outcome, path: Path, unit: IngestUnit, target: Path | str) -> Outcome:
    return _with(base, "refused", f"{path.name}: run {unit.robot}/{unit.run} already exists "
                 "with different bytes; pass --replace to replace it, or --run NEW_ID", target)


def _existing_sha(lake: Lake, rel: Path) -> str | None:
    found = published_file(lake, rel, "run.parquet")  # local or object storage
    if found is None:
        return None
    filesystem, run_file = found
    return pq.read_table(run_file, columns=["raw_sha256"], filesystem=filesystem).column(0)[0].as_py()


def identity_sha256(stored: list, manifest_hash: bool) -> str | None:
    """What "the same bytes" means: the primary file's SHA-256 for a file input; for a
    directory input, the SHA-256 of its sorted `name sha256` lines (every kept file)."""
    if not stored:
        return None
    if not manifest_hash:
        return stored[0].sha256
    lines = "".join(f"{s.name} {s.sha256}\n" for s in sorted(stored, key=lambda s: s.name))
    return hashlib.sha256(lines.encode()).hexdigest()


def run_row(unit: IngestUnit, stored: list, manifest_hash: bool = False,
            stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run.parquet row: reader fields + frame statistics (`stats`, computed here when
    None) + hashes + verdict."""
    stats = frame_stats(unit.frames) if stats is None else stats
    fields = dict(unit.run_fields)
    reasons = list(unit.reasons)
    complete = fields.get("complete")
    confirmed = _completion_confirmed(fields, stats["frame_count"], reasons)
    flags = list(dict.fromkeys(unit.flags + flags_for(stats, complete)))
    verdict = verdict_for(flags, complete)
    row = {name: None for name in RUN_SCHEMA.names}
    row.update({k: v for k, v in stats.items() if k in row})
    row.update({k: v for k, v in fields.items() if k in row})
    row.update(raw_files=[s.as_row() for s in stored],
               raw_sha256=identity_sha256(stored, manifest_hash), completion_confirmed=confirmed, verdict=verdict, reasons=reasons,
               flags=flags, twinlake_version=__version__)
    # source-specific fields (fit_eligible, recorded_gaps, gains, ...) follow the canonical ones
    row.update({k: v for k, v in fields.items() if k not in row})
    return row


def run_table(row: dict[str, Any]) -> pa.Table:
    """One-row run.parquet: RUN_SCHEMA columns in order, then the source's extra fields
    (types inferred; a `pa.Scalar` value keeps its declared type)."""
    canonical = {k: (row[k].as_py() if isinstance(row[k], pa.Scalar) else row[k])
                 for k in RUN_SCHEMA.names}
    table = pa.Table.from_pylist([canonical], schema=RUN_SCHEMA)
    for key, value in row.items():
        if key not in RUN_SCHEMA.names:
            table = table.append_column(key, pa.array([value]))
    return table


def _completion_confirmed(fields: dict, frame_count: int, reasons: list[str]) -> bool:
    if fields.get("status_written") is None and fields.get("complete") is None:
        return False
    if not fields.get("complete"):
        reasons.append(f"recording status: complete=false (dropped={fields.get('status_dropped')}"
                       f", error={fields.get('status_error')!r})")
        return False
    written = fields.get("status_written")
    if written is not None and written != frame_count:
        reasons.append(f"recording status says written={written}, file has {frame_count} rows")
        return False
    return not fields.get("status_error")


def write_parquet(table: pa.Table, path: Path) -> None:
    """Snappy, no dictionary encoding: dictionaries are useless for 1 kHz float signals and
    trying them costs ~5x the write time."""
    pq.write_table(table, path, compression=PARQUET_COMPRESSION, use_dictionary=False,
                   row_group_size=ROW_GROUP_ROWS)


def write_frames_parquet(frames: pa.Table, path: Path) -> None:
    """`frames.parquet`, by Arrow's writer (`write_parquet`): the same bytes for the same
    table in any process. (Polars' parallel writer pays more kernel time on its first write in
    a process than its parallelism saves in a fresh `twinlake ingest`.)"""
    write_parquet(frames, path)


def _write(lake: Lake, staging: Path, unit: IngestUnit, row: dict, raw: RawStore) -> None:
    """The run partition's files in `staging` (the one write step: every file, then the run's
    default-rule intervals computed from them, so they are published and replaced with it)."""
    if unit.targets is not None:
        write_parquet(unit.targets, staging / "targets.parquet")
    for name, table in unit.extra_tables.items():
        write_parquet(table, staging / f"{name}.parquet")
    raw.move_into(staging)
    write_parquet(run_table(row), staging / "run.parquet")
    stage_run_intervals(lake, staging, unit.robot, unit.run)  # while frames.parquet flushes
    raw.wait_syncs()
