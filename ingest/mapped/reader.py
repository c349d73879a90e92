"""Reader `mapped_log`: a CSV, Parquet or NumPy `.npz` log of the user's own layout, read
through a mapping TOML (`twinlake ingest FILE --mapping MAP.toml`; `mapping.py`).

The file kind is decided from content (Parquet's `PAR1`, a zip's `PK\\x03\\x04` for `.npz`,
else CSV text). Every column the mapping names must be in the file, else the file is refused
naming the mapping file, the key, the column and what the file has. The reader never matches
in detection (its reason says to pass `--mapping`); the pipeline uses it for every file
argument when `ReadOptions.mapping` is set.

Frames: `t_s` from the time column (× its unit; cumulated when `steps`), the mapped joint
signals in SI units, the [run] constants (`controller`, `K_joint`/`D_joint` from kp/kd,
`filter_alpha`) on every row. There is no robot tick counter in such a log: `seq` is left
out and the pipeline rebuilds the tick grid from the median period (`tick_grid`), so
skipped ticks are seq gaps and stale repeats are flagged, never interpolated.
"""

from __future__ import annotations

import csv
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ...catalog import JOINTS
from ..registry import Detection, IngestError, IngestUnit, RawFile, ReadOptions, register
from ..source_io import read_header, read_typed_csv
from ..tick_grid import grid_from_time
from .mapping import SIGNALS, Mapping, load_mapping

JOINT_IMPEDANCE = 2
_ANGLE_PREFIXES = {prefix for prefix, kind in SIGNALS.values() if kind == "angle"}
_KEY_OF = {prefix: key for key, (prefix, _kind) in SIGNALS.items()}


def file_kind(path: Path) -> str:
    """`parquet`, `npz` or `csv`, from the file's first bytes."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head == b"PAR1":
        return "parquet"
    if head == b"PK\x03\x04":
        return "npz"
    return "csv"


class MappedLogReader:
    name = "mapped_log"

    def detect(self, path: Path) -> Detection:
        return Detection.no("a log of your own layout is read with --mapping MAP.toml "
                            "(docs/formats.md)")

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        if options.mapping is None:
            raise IngestError(path, "a mapped log needs --mapping MAP.toml")
        mapping = load_mapping(Path(options.mapping))
        kind = file_kind(path)
        more = None
        if kind == "csv" and path.stat().st_size >= CHUNK_BYTES:
            frames, more, reasons = _csv_chunks(path, mapping)
        else:
            data, n = _READ[kind](path, mapping)
            frames, reasons = _frames(path, mapping, data, n)
            seq, grid = grid_from_time(path, frames.column("t_s").to_numpy())
            frames = frames.append_column("seq", pa.array(seq, pa.int64()))
            reasons += [grid] + _empty_cells(data, kind)
        run = mapping.run
        fields: dict[str, Any] = {
            "source_format": f"mapped_{kind}",
            "payload_kg": run.get("payload_kg"),
            "metadata_json": json.dumps({"mapping_file": mapping.path.name,
                                         "mapping": mapping.table, "source_kind": kind,
                                         "time_clock": mapping.clock}, sort_keys=True),
            "mapping_file": mapping.path.name,
            "mapping_toml": mapping.text,
            "time_clock": mapping.clock,
            "tick_grid": "rebuilt",
        }
        return IngestUnit(robot=options.robot or run.get("robot"),
                          run=options.run or run.get("run") or path.name.split(".")[0],
                          frames=frames, raw_files=[RawFile(path, "recording"),
                                                    RawFile(mapping.path, "mapping")],
                          run_fields=fields, reasons=reasons, more_frames=more,
                          first_line=2 if kind == "csv" else None)


def _missing(path: Path, mapping: Mapping, have: list[str], kind_word: str) -> None:
    """Refuse the file if a column the mapping names is not in `have`, naming both."""
    have_set = set(have)
    for prefix, names in [("time", (mapping.time_column,)), *mapping.columns.items()]:
        for name in names:
            if name not in have_set:
                key = "time.column" if prefix == "time" else f"columns.{_KEY_OF[prefix]}"
                shown = ", ".join(have[:16]) + (", ..." if len(have) > 16 else "")
                bad = next((h for h in have if "\ufffd" in h), None)
                note = (f"; its header is not UTF-8 text (column {bad!r}): save it as UTF-8"
                        if bad is not None else "")
                raise IngestError(path, f"mapping {mapping.path.name} [{key}] names {kind_word} "
                                  f"{name!r}, which {path.name} does not have (its "
                                  f"{kind_word}s: {shown}){note}", field=name, kind="mapping")


def _csv_header(path: Path) -> list[str]:
    """The header's column names, CSV quoting undone (a writer may quote every name)."""
    line = read_header(path)
    if line:  # a UTF-8 byte-order mark is not part of the first name (Arrow skips it too)
        line[0] = line[0].removeprefix("\ufeff")
    return next(csv.reader([",".join(line)])) if line else []


def _check_csv_columns(path: Path, mapping: Mapping) -> None:
    header = _csv_header(path)
    _missing(path, mapping, header, "column")
    for prefix, names in mapping.columns.items():
        if len(names) == 1:
            raise IngestError(path, f"mapping {mapping.path.name} [columns.{_KEY_OF[prefix]}]: "
                              f"{names[0]!r} is one name; a CSV needs a pattern with {{i}} or "
                              f"{{j}}, or a list of {JOINTS} names", kind="mapping")


def _read_csv(path: Path, mapping: Mapping) -> tuple[dict[str, np.ndarray], int]:
    _check_csv_columns(path, mapping)
    wanted = mapping.source_columns()
    table = read_typed_csv(path, {c: pa.float64() for c in wanted})
    return {c: table.column(c) for c in wanted}, table.num_rows


def _read_parquet(path: Path, mapping: Mapping) -> tuple[dict[str, np.ndarray], int]:
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise IngestError(path, f"not a readable Parquet file: {exc}", kind="corrupt") from None
    _missing(path, mapping, schema.names, "column")
    wanted = mapping.source_columns()
    for name in wanted:
        typ = schema.field(name).type
        if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
            raise IngestError(path, f"column {name!r} is {typ}, expected numbers (mapping "
                              f"{mapping.path.name})", field=name)
    table = pq.read_table(path, columns=wanted)
    return {c: table.column(c).cast(pa.float64()) for c in wanted}, table.num_rows


def _read_npz(path: Path, mapping: Mapping) -> tuple[dict[str, np.ndarray], int]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise IngestError(path, f"not a readable .npz archive: {exc}", kind="corrupt") from None
    with archive:
        _missing(path, mapping, list(archive.files), "array")
        time = _member(path, archive, mapping.time_column)
        if time.ndim != 1:
            raise IngestError(path, f"array {mapping.time_column!r} has shape {time.shape}, "
                              "expected one value per row (n,)", field=mapping.time_column)
        n = time.shape[0]
        out = {mapping.time_column: time.astype(np.float64)}
        for prefix, names in mapping.columns.items():
            if len(names) == 1:
                arr = _member(path, archive, names[0])
                if arr.shape != (n, JOINTS):
                    raise IngestError(path, f"array {names[0]!r} has shape {arr.shape}, expected "
                                      f"({n}, {JOINTS}) (mapping {mapping.path.name} "
                                      f"[columns.{_KEY_OF[prefix]}])", field=names[0])
                out.update({f"{names[0]}[{j}]": arr[:, j].astype(np.float64) for j in range(JOINTS)})
                continue
            for name in names:
                arr = _member(path, archive, name)
                if arr.shape != (n,):
                    raise IngestError(path, f"array {name!r} has shape {arr.shape}, expected "
                                      f"({n},) like {mapping.time_column!r}", field=name)
                out[name] = arr.astype(np.float64)
    return out, n


def _member(path: Path, archive: Any, name: str) -> np.ndarray:
    """Array `name` of the archive, refused (naming it) when its bytes do not read back (a
    bad CRC, a zlib error, pickled objects) or it holds anything but real numbers (text,
    complex: a cast would drop the imaginary part)."""
    try:
        arr = np.asarray(archive[name])
    except Exception as exc:  # zipfile.BadZipFile, zlib.error, ValueError (object arrays)
        text = str(exc).splitlines()[0] if str(exc) else ""
        raise IngestError(path, f"array {name!r} cannot be read: {type(exc).__name__}: {text} "
                          "(expected a numeric array saved with numpy.savez)", field=name,
                          kind="corrupt") from None
    if arr.dtype.kind not in "iuf":
        raise IngestError(path, f"array {name!r} holds {arr.dtype} values, expected real "
                          "numbers (integer or floating point)", field=name)
    return arr


CHUNK_BYTES = 32 << 20
"""A mapped CSV this large is read a block of this many bytes at a time (`_csv_chunks`)."""


def _csv_chunks(path: Path, mapping: Mapping) -> tuple[pa.Table, Iterator[pa.Table], list[str]]:
    """(first frames, the rest, reasons) of a large mapped CSV in bounded memory: the time
    column first, whole (the tick grid needs the run's median period), then the mapped
    columns a block at a time (Arrow's streaming reader, the values of `read_typed_csv`).
    The empty-cell reasons are added to `reasons` once the last block is read."""
    _check_csv_columns(path, mapping)
    time = _arrow_stream(path, [mapping.time_column])
    t_s = _time_s(path, mapping, pa.concat_arrays(
        [b.column(0) for b in time] or [pa.array([], pa.float64())]))
    del time
    pa.default_memory_pool().release_unused()  # the parse buffers of that pass, given back
    if t_s.size == 0:
        raise IngestError(path, "no rows", kind="empty")
    seq, grid = grid_from_time(path, t_s)
    reasons: list[str] = []

    def frames() -> Iterator[pa.Table]:
        row, nulls = 0, {}
        for batch in _arrow_stream(path, mapping.source_columns()):
            n = batch.num_rows
            data = {name: batch.column(name) for name in batch.schema.names}
            table, said = _frames(path, mapping, data, n, t_s[row:row + n])
            if not row:
                reasons.extend(said + [grid])
            for name, column in data.items():
                if column.null_count:
                    first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                    count, at = nulls.get(name, (0, row + first))
                    nulls[name] = (count + column.null_count, at)
            yield table.append_column("seq", pa.array(seq[row:row + n], pa.int64()))
            row += n
        reasons.extend(f"column {name!r}: {count} empty cells, first at line {at + 2}, stored "
                       "as null (not recorded)" for name, (count, at) in nulls.items())

    rest = frames()
    return next(rest), rest, reasons


def _arrow_stream(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The `columns` of the CSV as float64 record batches of `CHUNK_BYTES` of the file; a
    value Arrow cannot read is named (line, column) by `read_typed_csv` reading it whole."""
    convert = pacsv.ConvertOptions(column_types={c: pa.float64() for c in columns},
                                   include_columns=columns, null_values=[""],
                                   strings_can_be_null=True, quoted_strings_can_be_null=True)
    read = pacsv.ReadOptions(use_threads=False, block_size=CHUNK_BYTES)
    try:
        yield from pacsv.open_csv(path, read_options=read, convert_options=convert)
    except pa.ArrowInvalid as exc:
        read_typed_csv(path, {c: pa.float64() for c in columns})  # raises naming the line
        raise IngestError(path, f"cannot read the CSV: {str(exc).splitlines()[0]}") from None


_READ = {"csv": _read_csv, "parquet": _read_parquet, "npz": _read_npz}


def _source(data: dict[str, Any], names: tuple[str, ...], j: int) -> Any:
    return data[f"{names[0]}[{j}]"] if len(names) == 1 else data[names[j]]


def _values(column: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(float64 values, null mask or None) of a numpy array or an Arrow column: an empty CSV
    cell or a null Parquet cell stays null ("not recorded"), never NaN."""
    if isinstance(column, np.ndarray):
        return column, None
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    nulls = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else None
    return column.fill_null(0.0).to_numpy(zero_copy_only=False), nulls


def _empty_cells(data: dict[str, Any], kind: str) -> list[str]:
    """A reason per column holding empty (null) cells: stored as null, "not recorded"."""
    out = []
    for name, column in data.items():
        if not isinstance(column, np.ndarray) and column.null_count:
            first = int(np.flatnonzero(_values(column)[1])[0])
            where = f"line {first + 2}" if kind == "csv" else f"row {first}"
            out.append(f"column {name!r}: {column.null_count} empty cells, first at {where}, "
                       "stored as null (not recorded)")
    return out


def _time_s(path: Path, mapping: Mapping, column: Any) -> np.ndarray:
    """`t_s` of the whole run from its time column (× unit, cumulated when `steps`)."""
    t, empty = _values(column)
    if empty is not None:
        row = int(np.flatnonzero(empty)[0])
        raise IngestError(path, f"time column {mapping.time_column!r} is empty at "
                          f"{'line ' + str(row + 2) if file_kind(path) == 'csv' else 'row ' + str(row)}"
                          ": expected a time on every row", field=mapping.time_column,
                          line=row + 2 if file_kind(path) == "csv" else None)
    t = t * mapping.time_scale
    return np.cumsum(t) - t[0] if mapping.steps else t


def _frames(path: Path, mapping: Mapping, data: dict[str, np.ndarray],
            n: int, t: np.ndarray | None = None) -> tuple[pa.Table, list[str]]:
    """Canonical columns (without `seq`) and the reasons worth saying about them; `t`: the
    rows' `t_s` when computed already (a chunk of a run)."""
    if n == 0:
        raise IngestError(path, "no rows", kind="empty")
    t = _time_s(path, mapping, data[mapping.time_column]) if t is None else t
    cols: dict[str, Any] = {"t_s": t}
    if mapping.clock == "robot":
        cols["robot_time_s"] = t
    for prefix, names in mapping.columns.items():
        scale = mapping.angle_scale if prefix in _ANGLE_PREFIXES else 1.0
        for j in range(JOINTS):
            values, nulls = _values(_source(data, names, j))
            values = values * scale if scale != 1.0 else values
            cols[f"{prefix}{j + 1}"] = pa.array(values, mask=nulls) if nulls is not None else values
    reasons = [f"time from column {mapping.time_column!r} ({mapping.clock} clock)"]
    reasons += _constants(path, mapping, cols, n)
    return pa.table({k: pa.array(v) for k, v in cols.items()}), reasons


def _constants(path: Path, mapping: Mapping, cols: dict[str, Any], n: int) -> list[str]:
    """The [run] constants as columns; a joint-impedance run needs its targets."""
    run, reasons = mapping.run, []
    controller = run.get("controller")
    if controller is not None:
        cols["controller"] = pa.array(np.full(n, controller, np.int32))
    if controller == JOINT_IMPEDANCE:
        if "q_target" not in mapping.columns:
            raise IngestError(mapping.path, "[run] controller = joint_impedance needs "
                              "[columns] q_target (the joint targets it tracks)",
                              field="columns.q_target", kind="mapping")
        cols["joint_target_valid"] = pa.array(np.ones(n, np.int8))
        if "q_target_filtered" not in mapping.columns:
            for j in range(1, JOINTS + 1):
                cols[f"q_target_filtered{j}"] = cols[f"q_target{j}"]
            reasons.append("no filtered target mapped: q_target_filtered = q_target")
    for key, prefix in (("kp", "K_joint"), ("kd", "D_joint")):
        if key in run:
            for j in range(JOINTS):
                cols[f"{prefix}{j + 1}"] = np.full(n, run[key][j])
    if "filter_alpha" in run:
        cols["filter_alpha"] = np.full(n, run["filter_alpha"])
    return reasons


register(MappedLogReader())
