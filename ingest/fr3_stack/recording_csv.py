"""Reader for the fr3_stack 1 kHz recording CSV: v2 (80 columns) and legacy v1 (first 45).

Source: fr3_stack `src/ring_log_writer.cpp` (docs/formats.md). Parsing is by header name, never by position; joint suffixes
`0..6` become canonical 1-based names (`q0` → `q1`). Zeros that the format documents as
"not available" become null: `tgt_*` under controllers without a pose target (0 idle,
2 joint impedance) and the joint-target block (columns 48-78) where `joint_target_valid`
is 0. Everything else is kept exactly as parsed (`q1` is `q0` bit for bit).
"""

from __future__ import annotations

import mmap
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...catalog import FRAME_SCHEMA
from ...contracts.csv_v2 import COLUMNS, LEGACY_COLUMNS
from ..companions import Companions, find_companions
from .. import decimal_native
from ..canonical import null_where
from ..csv_integers import as_double, float_text_in_int_column, integral_to_int
from ..registry import (
    Detection,
    IngestError,
    IngestUnit,
    RawFile,
    ReadOptions,
    register,
)

FORMAT = "fr3_stack_csv"
_POSE = ("px", "py", "pz", "qx", "qy", "qz", "qw")

V1_COLUMNS = LEGACY_COLUMNS
"""The 45 legacy columns, in file order."""

V2_COLUMNS = COLUMNS
"""The 80 columns of CSV v2, in file order."""

_JOINT_NAME = re.compile(r"^(q|dq|tau_J|tau_cmd|q_target|q_target_filtered|K_joint|D_joint)([0-6])$")
_INT_TYPES = {"seq": pa.int64(), "controller": pa.int32(), "schema_version": pa.int32(),
              "joint_target_valid": pa.int8(), "joint_use_friction": pa.int8(),
              "joint_reset_count": pa.int64()}
_MARKERS = ("q0", "dq0", "tau_J0", "tau_cmd0")
_JOINT_BLOCK = [f.name for f in FRAME_SCHEMA][FRAME_SCHEMA.get_field_index("q_target1"):
                                              FRAME_SCHEMA.get_field_index("joint_reset_count") + 1]
CHUNK_BYTES = 24 << 20
"""Bytes of the file parsed at a time by `frame_chunks` (~29 000 lines of a CSV v2). With the
next span parsed ahead two are in memory: 24 MiB kept a 3.6 M-row ingest's peak ~60 MB under
32 MiB's at the same speed (bench/RESULTS.md, "Ingest: the allocators, overlap and start-up")."""
DECIMAL_MIN_BYTES = 128 << 20
"""A file this large loads the compiled decimal reader (`decimal_table`) in any case."""
_DECIMAL_MODULE = f"{__package__.rpartition('.')[0]}.decimal_csv"
_NO_POSE_TARGET = pa.array([0, 2], pa.int32())  # controllers without a Cartesian target


def canonical_name(source: str) -> str:
    """`q0` → `q1`, `K_joint6` → `K_joint7`; other names unchanged."""
    m = _JOINT_NAME.match(source)
    return f"{m.group(1)}{int(m.group(2)) + 1}" if m else source


def read_header(path: Path, limit: int = 1 << 16) -> list[str]:
    """Column names of line 1; IngestError for an empty, binary or undecodable file."""
    with open(path, "rb") as fh:
        head = fh.read(limit)
    if not head:
        raise IngestError(path, "empty file", line=1, kind="empty")
    if b"\x00" in head:
        raise IngestError(path, "binary data (NUL byte), not a CSV text file", line=1,
                          kind="binary")
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise IngestError(path, "header is not ASCII text", line=1, kind="binary") from None
    return [name.strip() for name in text.split(",")]


class Fr3CsvReader:
    """fr3_stack recording CSV v1/v2 (+ optional `.status.json` / `.meta.json` companions)."""

    name = FORMAT

    def detect(self, path: Path) -> Detection:
        if not path.is_file():
            return Detection.no("not a file")
        try:
            header = read_header(path)
        except IngestError as exc:
            return Detection.no(exc.message)
        if "seq" not in header or not any(m in header for m in _MARKERS):
            return Detection.no("header has no 'seq' and 0-based joint columns (q0, tau_J0, ...)")
        version = 2 if "schema_version" in header else 1
        return Detection(True, f"header names fr3_stack CSV v{version} columns", version)

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        header = read_header(path)
        version = check_header(path, header)
        companions = find_companions(path)
        chunks, truncated = frame_chunks(path, header, version, options.allow_partial)
        unit = IngestUnit(
            robot=options.robot or companions.robot_id,
            # the file's own name, as the user chose it (the recording ID stays in the run row)
            run=options.run or companions.declared_run or path.stem,
            frames=next(chunks), more_frames=chunks,
            raw_files=[RawFile(path, "recording")] + companions.raw_files(),
            run_fields=_run_fields(path, version, companions),
            reasons=list(companions.notes),
            first_line=2,
        )
        if unit.run_fields.get("aborted"):
            unit.flags.append("aborted")
            unit.reasons.append(f"the excitation ended {unit.run_fields['excitation_status']!r} "
                                f"({companions.metadata_path.name}: excitation_status): the "
                                "recording stops where the client stopped its plan")
        if truncated:
            unit.run_fields["complete"] = False
            unit.flags.append("truncated")
            unit.reasons.append(f"{path.name}: truncated last line dropped (--allow-partial)")
        # 1 kHz data a fit may use: v2 (it has the joint targets) and not known to be incomplete
        unit.run_fields["fit_eligible"] = version == 2 and unit.run_fields.get("complete") is not False
        return unit


def _run_fields(path: Path, version: int, comp: Companions) -> dict:
    fields = {"source_format": FORMAT, "source_version": version, "source_file": path.name}
    fields.update(comp.run_fields())
    return fields


def check_header(path: Path, header: list[str]) -> int:
    """The CSV version (1 or 2) if the header names exactly the v1 or v2 columns."""
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise IngestError(path, "duplicate header column", line=1, field=name, kind="header")
        seen.add(name)
    expected = V2_COLUMNS if "schema_version" in seen else V1_COLUMNS
    version = 2 if expected is V2_COLUMNS else 1
    missing = [c for c in expected if c not in seen]
    unknown = [c for c in header if c not in expected]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing {_names(missing)}")
        if unknown:
            parts.append(f"unexpected {_names(unknown)}")
        raise IngestError(path, f"header does not match CSV v{version} ({len(expected)} "
                          f"columns): {'; '.join(parts)}", line=1,
                          field=(unknown or missing)[0], kind="header")
    return version


def _names(names: list[str]) -> str:
    return ", ".join(names[:8]) + (f" ... ({len(names)} in all)" if len(names) > 8 else "")


def parse_frames(path: Path, header: list[str], version: int,
                 allow_partial: bool) -> tuple[pa.Table, bool]:
    """Parse the rows (the compiled decimal reader, else polars, else pyarrow.csv on one
    thread, which names the line and field of an error) into canonical frames; returns
    `(frames, truncated)`. A last line without `\\n` is an error unless `allow_partial`."""
    buf = pa.memory_map(str(path), "r").read_buffer()
    truncated = _last_byte(buf) != 10
    if truncated:
        lines = memoryview(buf).tobytes().count(b"\n") + 1
        if not allow_partial:
            raise IngestError(path, "truncated last line (no final newline); "
                              "--allow-partial keeps the complete rows", line=lines,
                              kind="truncated")
        buf = buf.slice(0, _last_newline(buf) + 1)
    table = decimal_table(buf, header)
    if table is None and not truncated:
        table = polars_csv(path, header)
    if table is None:
        table = _read_csv(path, buf, header)
    if table.num_rows == 0:
        raise IngestError(path, "no data rows after the header", line=2, kind="empty")
    return canonical_frames(table, version), truncated


def frame_chunks(path: Path, header: list[str], version: int,
                 allow_partial: bool) -> tuple[Iterator[pa.Table], bool]:
    """`(chunks, truncated)`: the canonical frames of `parse_frames`, a span of about
    `CHUNK_BYTES` of the file at a time where the compiled decimal reader serves (as
    `decimal_table` decides; each span's pages are dropped from this process once parsed,
    so memory does not grow with the file), else the whole table as one chunk. A span it
    declines and every line after it are parsed the general way (its errors name the line)."""
    size = path.stat().st_size
    if size == 0 or (size < DECIMAL_MIN_BYTES and _DECIMAL_MODULE not in sys.modules
                     and not decimal_native.is_built()):
        frames, truncated = parse_frames(path, header, version, allow_partial)
        return iter([frames]), truncated
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    data = np.frombuffer(mm, dtype=np.uint8)
    truncated = data[-1] != 10
    if truncated:  # parse_frames refuses it, or keeps the complete lines
        frames, truncated = parse_frames(path, header, version, allow_partial)
        return iter([frames]), truncated
    return _decimal_chunks(path, mm, data, header, version), False


def _decimal_chunks(path: Path, mm: mmap.mmap, data: np.ndarray, header: list[str],
                    version: int) -> Iterator[pa.Table]:
    from ..decimal_csv import read_decimal_chunks  # here: it may build the C kernels

    def release(lo: int, hi: int) -> None:
        lo, hi = lo // mmap.PAGESIZE * mmap.PAGESIZE, hi // mmap.PAGESIZE * mmap.PAGESIZE
        if hi > lo:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    rows = 0
    for lo, table in read_decimal_chunks(data, header, _column_types(header), CHUNK_BYTES,
                                         release=release):
        if table is None:
            yield from _rest_general(path, data, lo, header, version, rows)
            return
        rows += table.num_rows
        yield canonical_frames(table, version)


def _rest_general(path: Path, data: np.ndarray, lo: int, header: list[str], version: int,
                  rows: int) -> Iterator[pa.Table]:
    """The lines from byte `lo` on (row `rows` on), parsed the general way: the whole file by
    `parse_frames` when nothing was parsed yet, else Arrow's reader over the header and the
    rest, whose errors name the file's own line."""
    if rows == 0:
        yield parse_frames(path, header, version, False)[0]
        return
    rest = pa.py_buffer(",".join(header).encode() + b"\n" + data[lo:].tobytes())
    try:
        table = _read_csv(path, rest, header)
    except IngestError as err:
        raise IngestError(path, err.message, field=err.field, kind=err.kind,
                          line=None if err.line is None else err.line + rows) from None
    yield canonical_frames(table, version)


def decimal_table(buf: pa.Buffer, header: list[str]) -> pa.Table | None:
    """The compiled decimal reader's table (`decimal_csv`: bit for bit polars' and Arrow's,
    ~2x fewer CPU seconds) when its C kernels are built on this machine already (loading
    them is a dlopen), its kernels are loaded in this process already, or the file has
    `DECIMAL_MIN_BYTES` or more; None otherwise or when it declines. Where only numba's
    kernels can serve, loading them costs ~0.5-0.9 s once per process: in a fresh `twinlake
    ingest` of one file that breaks even at ~0.5 GB, and wins on every file after it."""
    if buf.size < DECIMAL_MIN_BYTES and _DECIMAL_MODULE not in sys.modules \
            and not decimal_native.is_built():
        return None
    from ..decimal_csv import read_decimal_csv  # here: it may build the C kernels or load numba

    return read_decimal_csv(buf, header, _column_types(header))


def _last_byte(buf: pa.Buffer) -> int:
    return buf.slice(buf.size - 1, 1).to_pybytes()[0]


def _last_newline(buf: pa.Buffer) -> int:
    view = memoryview(buf)
    start = max(0, buf.size - (1 << 20))
    pos = bytes(view[start:]).rfind(b"\n")
    return start + pos if pos >= 0 else bytes(view).rfind(b"\n")


def _column_types(header: list[str]) -> dict[str, pa.DataType]:
    return {name: _INT_TYPES.get(name, pa.float64()) for name in header}


def polars_csv(path: Path, header: list[str]) -> pa.Table | None:
    """The fast path: polars' CSV reader (~25% fewer CPU seconds than Arrow's, on both
    cores, one chunk per column). Returns None, for the Arrow path (which names the line
    and field of an error) to decide, unless the table is exactly what Arrow would give:
    polars read the header's names, every line (an empty line is a row of nulls there, so
    any null declines) and every value under its type; its float parsing is bit-identical
    to Arrow's (both correctly rounded; NaN and -0 kept bit for bit)."""
    import polars as pl  # here: the compiled reader parses most files without it

    pl_types = {pa.int64(): pl.Int64, pa.int32(): pl.Int32, pa.int8(): pl.Int8,
                pa.float64(): pl.Float64}
    types = {name: pl_types[t] for name, t in _column_types(header).items()}
    try:
        df = pl.read_csv(path, has_header=True, schema_overrides=types, infer_schema=False,
                         quote_char=None, null_values=None, encoding="utf8")
    except (pl.exceptions.PolarsError, ValueError, UnicodeDecodeError):
        return None
    if df.columns != header or df.height == 0 or any(df.null_count().row(0)):
        return None
    return df.to_arrow()


def _read_csv(path: Path, buf: pa.Buffer, header: list[str]) -> pa.Table:
    """Parse with the column types; integer columns written as integral floats (`17.0`)
    are re-read as doubles and cast back (csv_integers), `0.5` there is an error."""
    types = _column_types(header)
    try:
        return _arrow_csv(buf, types)
    except pa.ArrowInvalid as exc:
        if not float_text_in_int_column(str(exc), header, frozenset(_INT_TYPES)):
            raise locate_csv_error(path, buf, header, str(exc)) from None
    try:
        table = _arrow_csv(buf, as_double(types))
    except pa.ArrowInvalid as exc:
        raise locate_csv_error(path, buf, header, str(exc), frozenset(_INT_TYPES)) from None
    return integral_to_int(path, table, types, first_line=2)


def _arrow_csv(buf: pa.Buffer, types: dict[str, pa.DataType]) -> pa.Table:
    convert = pacsv.ConvertOptions(column_types=types, null_values=[],
                                   strings_can_be_null=False, quoted_strings_can_be_null=False)
    parse = pacsv.ParseOptions(quote_char=False, ignore_empty_lines=False)
    # One thread: Arrow's threaded CSV reader costs ~2x the CPU seconds on 2 cores for no
    # wall-time gain; the other core hashes and compresses the raw copy meanwhile (rawstore).
    read = pacsv.ReadOptions(use_threads=False, block_size=1 << 20)  # 1 MiB: cache-friendly
    return pacsv.read_csv(pa.BufferReader(buf), read_options=read, parse_options=parse,
                          convert_options=convert)


_CONV = re.compile(r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to (\w+): "
                   r"invalid value '(.*)'")  # the single-threaded reader names the row
_PARSE = re.compile(r"Expected (\d+) columns, got (\d+): (.*)", re.S)
_NUMBER = {"int": r"^[0-9]+$", "float": r"^[+-]?((nan|inf|infinity)|([0-9]+\.?[0-9]*|\.[0-9]+)"
                                         r"([eE][+-]?[0-9]+)?)$"}


def locate_csv_error(path: Path, buf: pa.Buffer, header: list[str], message: str,
                     integer_columns: frozenset[str] = frozenset()) -> IngestError:
    """Turn a pyarrow CSV error into an IngestError naming the line and the field
    (`integer_columns`: columns parsed as doubles but meant as integers)."""
    data = memoryview(buf).tobytes()
    m = _CONV.search(message)
    if m:
        col = header[int(m.group(1))]
        kind = "integer" if col in integer_columns else m.group(2)
        return IngestError(path, f"not a valid {kind}: {m.group(3)!r}",
                           line=_bad_value_line(buf, header, col, m.group(2)), field=col,
                           kind="non_numeric")
    m = _PARSE.search(message)
    if m:
        text = m.group(3).rstrip("\n")
        cut = text.endswith(" ...")  # pyarrow abbreviates long rows
        needle = b"\n" + (text[:-4] if cut else text).encode() + (b"" if cut else b"\n")
        pos = data.find(needle)
        line = data.count(b"\n", 0, pos + 1) + 1 if pos >= 0 else None
        return IngestError(path, f"expected {m.group(1)} fields, got {m.group(2)}",
                           line=line, kind="field_count")
    return IngestError(path, f"cannot parse CSV: {message.splitlines()[0]}", kind="parse")


def _bad_value_line(buf: pa.Buffer, header: list[str], col: str, type_name: str) -> int | None:
    """1-based line of the first cell of `col` that does not parse as `type_name`."""
    convert = pacsv.ConvertOptions(column_types={col: pa.string()}, include_columns=[col],
                                   null_values=[], strings_can_be_null=False)
    parse = pacsv.ParseOptions(quote_char=False, ignore_empty_lines=False)
    try:
        values = pacsv.read_csv(pa.BufferReader(buf), parse_options=parse,
                                convert_options=convert).column(col)
    except pa.ArrowInvalid:
        return None
    pattern = _NUMBER["int" if "int" in type_name else "float"]
    ok = pc.match_substring_regex(values, pattern, ignore_case=True)
    bad = pc.index(ok, False).as_py()
    return bad + 2 if bad >= 0 else None


def canonical_frames(table: pa.Table, version: int) -> pa.Table:
    """Rename to canonical 1-based names, add v2-only columns as null for v1, null the
    documented not-available zeros, and order columns as FRAME_SCHEMA."""
    table = table.rename_columns([canonical_name(c) for c in table.column_names])
    n = table.num_rows
    have = set(table.column_names)
    columns = {}
    for field in FRAME_SCHEMA:
        if field.name in have:
            columns[field.name] = table.column(field.name)
        elif field.name == "schema_version":
            columns[field.name] = pa.repeat(pa.scalar(version, pa.int32()), n)
        else:
            columns[field.name] = pa.nulls(n, field.type)
    controller = columns["controller"]
    no_pose = pc.is_in(controller, value_set=_NO_POSE_TARGET)
    if pc.any(no_pose).as_py():
        for s in _POSE:
            columns[f"tgt_{s}"] = null_where(no_pose, columns[f"tgt_{s}"])
    if version >= 2:
        invalid = pc.not_equal(columns["joint_target_valid"], 1)
        if pc.any(invalid).as_py():
            for name in _JOINT_BLOCK:
                columns[name] = null_where(invalid, columns[name])
    return pa.Table.from_arrays([columns[f.name] for f in FRAME_SCHEMA], schema=FRAME_SCHEMA)


register(Fr3CsvReader())
