"""Small I/O helpers shared by the FrankaTwin, excitation and episode readers.

Typed CSV reading with Arrow (no per-row Python) and one-line errors naming the file, line
and field; gzip with a clear "truncated" error; JSON loading. (Conforming a frame table to
the canonical columns is `twinlake.ingest.canonical.conform_frames`.)
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from .csv_integers import as_double, float_text_in_int_column, integral_to_int
from .registry import IngestError


def read_bytes(path: Path) -> bytes:
    """The file's bytes; `.gz` files are decompressed (a truncated or corrupt stream is an
    `IngestError` saying so)."""
    data = Path(path).read_bytes()
    if path.name.endswith(".gz"):
        try:
            return gzip.decompress(data)
        except EOFError:
            raise IngestError(path, "truncated gzip stream (ended before the end-of-stream "
                              "marker)", kind="truncated") from None
        except (OSError, zlib.error) as exc:
            raise IngestError(path, f"not a valid gzip stream: {exc}", kind="corrupt") from None
    return data


def read_header(path: Path) -> list[str]:
    """The first line split on commas (for `.gz`, of the decompressed text)."""
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            try:
                line = fh.readline(1 << 16)
            except (EOFError, OSError, zlib.error):
                return []
    else:
        with open(path, "rb") as fh:
            line = fh.readline(1 << 16)
    return line.decode("utf-8", "replace").rstrip("\r\n").split(",")


def describe_mismatch(header: list[str], expected: tuple[str, ...]) -> str:
    """One-line reason a header is not `expected` (first differing column, or the count)."""
    for i, (got, want) in enumerate(zip(header, expected)):
        if got != want:
            shown = got if len(got) <= 40 else got[:37] + "..."
            return f"column {i + 1} is {shown!r}, expected {want!r}"
    return f"{len(header)} columns, expected {len(expected)}"


def read_typed_csv(path: Path, types: dict[str, pa.DataType], *,
                   data: bytes | None = None) -> pa.Table:
    """Read a headed CSV with Arrow, columns cast to `types` (others inferred). Empty fields
    are null; `nan`/`inf` text stays a float NaN/inf; integer columns written as integral
    floats (`17.0`, as pandas writes them) are integers. Errors name the line and column."""
    raw = read_bytes(path) if data is None else data
    try:
        return _arrow_csv(raw, types)
    except pa.ArrowInvalid as exc:
        header = raw.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r").split(",")
        ints = frozenset(n for n, t in types.items() if pa.types.is_integer(t))
        if not float_text_in_int_column(str(exc), header, ints):
            raise _locate(path, raw, types, str(exc)) from None
    try:
        table = _arrow_csv(raw, as_double(types))
    except pa.ArrowInvalid as exc:
        raise _locate(path, raw, types, str(exc)) from None
    return integral_to_int(path, table, types, first_line=2)


def _arrow_csv(raw: bytes, types: dict[str, pa.DataType]) -> pa.Table:
    convert = pacsv.ConvertOptions(column_types=types, null_values=[""],
                                   strings_can_be_null=True, quoted_strings_can_be_null=True)
    # one thread: on the shared 2-core machines this is faster than Arrow's thread pool
    return pacsv.read_csv(io.BytesIO(raw), read_options=pacsv.ReadOptions(use_threads=False),
                          convert_options=convert)


def _locate(path: Path, raw: bytes, types: dict[str, pa.DataType], message: str) -> IngestError:
    """Find the line an Arrow CSV error is about (error path only, so Python is fine)."""
    lines = raw.decode("utf-8", "replace").split("\n")
    header = lines[0].rstrip("\r").split(",")
    m = re.search(r"column #(\d+)", message)
    if m and int(m.group(1)) < len(header):
        col = int(m.group(1))
        name = header[col]
        for lineno, line in enumerate(lines[1:], start=2):
            cells = line.rstrip("\r").split(",")
            if col < len(cells) and not _parses(cells[col], types.get(name)):
                want = "an integer" if pa.types.is_integer(types.get(name)) else "a number"
                return IngestError(path, f"value {cells[col]!r} is not {want}", line=lineno,
                                   field=name)
        return IngestError(path, message, field=name)
    for lineno, line in enumerate(lines[1:], start=2):
        cells = line.rstrip("\r").split(",")
        if line.strip() and len(cells) != len(header):
            return IngestError(path, f"{len(cells)} fields, expected {len(header)} "
                               "(truncated or malformed row)", line=lineno)
    return IngestError(path, message)


def _parses(cell: str, typ: pa.DataType | None) -> bool:
    if cell == "" or typ is None:
        return True
    try:
        if pa.types.is_integer(typ):
            return cell.strip().lstrip("+-").isdigit() or float(cell).is_integer()
        float(cell)
        return True
    except ValueError:
        return False


def load_json(path: Path) -> Any:
    """Parse a JSON file; a syntax error is an `IngestError` naming the line."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise IngestError(path, f"invalid JSON: {exc.msg} (column {exc.colno})",
                          line=exc.lineno) from None
    except UnicodeDecodeError:
        raise IngestError(path, "not UTF-8 text") from None


def try_json(path: Path) -> Any | None:
    """`load_json`, or None if the file is missing or not JSON (for cheap detection)."""
    try:
        return load_json(path) if Path(path).is_file() else None
    except (IngestError, OSError):
        return None


def dumps(obj: Any) -> str:
    """Deterministic compact JSON text (sorted keys) for `*_json` run fields."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


SOURCE_FIELDS_TABLE = "run_source"
"""Extra table `run_source.parquet`: every run field a reader produced (one row), so no
sidecar/metadata field is lost even where run.parquet keeps only the RUN_SCHEMA columns."""


def source_fields_table(fields: dict[str, Any]) -> pa.Table:
    """One-row table of `fields` (types inferred; a `pa.Scalar` keeps its type; a None-only
    field becomes a string null, so the column has a usable type)."""
    cols, names = [], []
    for key, value in fields.items():
        if isinstance(value, pa.Scalar):
            cols.append(pa.array([value.as_py()], type=value.type))
        elif value is None:
            cols.append(pa.nulls(1, pa.string()))
        else:
            cols.append(pa.array([value]))
        names.append(key)
    return pa.Table.from_arrays(cols, names=names)
