"""Validation of canonical frames: a pandera schema (polars backend, zero-copy from Arrow)
for types, value sets and physical limits, plus Arrow-compute checks across rows (seq
strictly increasing) and columns (`joint_target_valid` ⇔ joint impedance).

Any violation raises `IngestError` naming the file, line and field. Only what makes the file
untrustworthy as a whole is a violation. A non-finite sample (NaN, ±inf: a sensor dropout in
`q`, `dq`, a target or a torque) is data: it passes here, is stored as recorded, counted per
column by `runstats` and excluded tick by tick by the intervals SQL (`nonfinite`). Limits
apply to finite values only. `t_s` (the time axis every tick is placed on) must be finite.

The rules are declared once (`column_rules`) and judged first with numpy over whole
columns (`passes_rules`: the comparisons pandera runs, its null handling, its types);
pandera (and polars, its backend) is imported and run only when that finds a violation, to
name the first failing row and field, and it has the last word. A valid file thus pays
neither their import nor pandera's one polars query per check.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import FRAME_SCHEMA, JOINTS
from .registry import IngestError

if TYPE_CHECKING:
    import pandera.polars as pap
    import polars as pl

# Physical joint position limits [rad]: the wider of fr3_stack's Q_MIN/Q_MAX
# (its controllers_common.hpp) and the MuJoCo Menagerie FR3 joint ranges, plus a margin.
Q_MIN = np.minimum([-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159],
                   [-2.9007, -1.8361, -2.9007, -3.0770, -2.8763, 0.4398, -3.0508])
Q_MAX = np.maximum([2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159],
                   [2.9007, 1.8361, 2.9007, -0.1169, 2.8763, 4.6216, 3.0508])
Q_MARGIN_RAD = 0.05
DQ_MAX_RAD_S = 10.0  # FR3 rates are 2.62 (J1-4) / 5.26 (J5-7) rad/s; this catches unit errors
CONTROLLERS = [0, 1, 2, 3, 4]
JOINT_IMPEDANCE = 2


class Rule(NamedTuple):
    """One check of a column: `kind` "within_when_finite" (finite values in [lo, hi]; NaN,
    ±inf and null pass; `unit` names the limits' unit), "finite", "ge" (>= lo) or "isin"
    (`values`)."""

    kind: str
    lo: float = 0.0
    hi: float = 0.0
    unit: str = ""
    values: tuple = ()


def column_rules(name: str, schema_version: int | None) -> tuple[list[Rule], bool]:
    """(rules, nullable) of one canonical column."""
    for j in range(1, JOINTS + 1):
        if name == f"q{j}":
            lo, hi = Q_MIN[j - 1] - Q_MARGIN_RAD, Q_MAX[j - 1] + Q_MARGIN_RAD
            return [Rule("within_when_finite", float(lo), float(hi), "rad")], True
        if name == f"dq{j}":
            return [Rule("within_when_finite", -DQ_MAX_RAD_S, DQ_MAX_RAD_S, "rad/s")], True
    if name == "seq":
        return [Rule("ge", 0)], False
    if name == "t_s":
        return [Rule("finite")], False
    if name == "controller":
        return [Rule("isin", values=tuple(CONTROLLERS))], True
    if name == "joint_target_valid":
        return [Rule("isin", values=(0, 1))], True
    if name == "schema_version" and schema_version is not None:
        return [Rule("isin", values=(schema_version,))], True
    return [], True


def rule_expr(rule: Rule, col: pl.Expr) -> pl.Expr:
    """The row-wise polars expression of `rule` (True: passes; null: no verdict)."""
    if rule.kind == "within_when_finite":
        return col.is_between(rule.lo, rule.hi) | ~col.is_finite()
    if rule.kind == "finite":
        return col.is_finite()
    if rule.kind == "ge":
        return col.ge(rule.lo)
    return col.is_in(list(rule.values))


def passes_rules(canon: pa.Table, schema_version: int | None) -> bool:
    """True when pandera would accept `canon`: every FRAME_SCHEMA column present with its
    type, no null or NaN in a non-nullable column, every rule true or null on every row (as
    pandera's `ignore_na` counts it; the same comparisons as `rule_expr`), judged with numpy
    over whole columns; False sends the frames to pandera, which names the first failure
    (and decides)."""
    present = {f.name: f.type for f in canon.schema}
    if any(present.get(f.name) != f.type for f in FRAME_SCHEMA):
        return False
    for field, rules, nullable in _judged_columns(schema_version):
        column = canon.column(field.name)
        if not nullable and column.null_count:
            return False
        values = _values(column)
        if not nullable and values.dtype.kind == "f" and np.isnan(values).any():
            return False
        if not all(_holds(rule, values) for rule in rules):
            return False
    return True


@lru_cache(maxsize=8)
def _judged_columns(schema_version: int | None) -> tuple[tuple[pa.Field, list[Rule], bool], ...]:
    """(field, rules, nullable) of each FRAME_SCHEMA column `passes_rules` looks at: those
    with rules, and the non-nullable ones (checked for null, a float one for NaN)."""
    out = []
    for field in FRAME_SCHEMA:
        rules, nullable = column_rules(field.name, schema_version)
        if rules or not nullable:
            out.append((field, rules, nullable))
    return tuple(out)


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """A column's non-null values (a view of its buffer when it has no null and one chunk)."""
    if not column.null_count and column.num_chunks == 1:
        return column.chunk(0).to_numpy(zero_copy_only=False)
    return column.drop_null().to_numpy()


def _holds(rule: Rule, values: np.ndarray) -> bool:
    """`rule` is true for every one of `values` (a column's non-null values)."""
    if rule.kind == "within_when_finite" and values.size:  # polars' is_between: lo <= x <= hi
        low, high = values.min(), values.max()  # NaN or ±inf among them: judged one by one
        if np.isfinite(low) and np.isfinite(high):
            return bool(low >= rule.lo and high <= rule.hi)
    if rule.kind == "within_when_finite":
        finite = values[np.isfinite(values)]
        return not finite.size or (finite.min() >= rule.lo and finite.max() <= rule.hi)
    if rule.kind == "finite":
        return bool(np.isfinite(values).all())
    if rule.kind == "ge":
        return not values.size or values.min() >= rule.lo
    return bool(np.isin(values, list(rule.values)).all())


def _pandera_check(rule: Rule) -> pap.Check:
    """The pandera Check of `rule` (the names and errors its failures are reported with)."""
    import pandera.polars as pap
    import polars as pl

    if rule.kind == "ge":
        return pap.Check.ge(int(rule.lo))
    if rule.kind == "isin":
        return pap.Check.isin(list(rule.values))

    def check(data: pap.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(rule_expr(rule, pl.col(data.key)))

    if rule.kind == "finite":
        return pap.Check(check, name="finite", error="a finite number")
    return pap.Check(check, name="within_when_finite",
                     error=f"finite values within [{rule.lo:.4f}, {rule.hi:.4f}] {rule.unit}")


@lru_cache(maxsize=8)
def frame_schema(schema_version: int | None) -> pap.DataFrameSchema:
    """The pandera (polars) schema of canonical frames; extra columns are allowed."""
    import pandera.polars as pap
    import polars as pl

    pl_types = {pa.int64(): pl.Int64, pa.int32(): pl.Int32, pa.int8(): pl.Int8,
                pa.float64(): pl.Float64, pa.bool_(): pl.Boolean}
    columns = {}
    for field in FRAME_SCHEMA:
        rules, nullable = column_rules(field.name, schema_version)
        columns[field.name] = pap.Column(pl_types[field.type],
                                         checks=[_pandera_check(r) for r in rules],
                                         nullable=nullable, required=True)
    return pap.DataFrameSchema(columns, strict=False, name="frames")


def validate_frames(path: Path, frames: pa.Table, schema_version: int | None,
                    first_line: int | None = 2, first_frame: int = 0) -> None:
    """Raise IngestError for the first violation; `first_line` is the file line of row 0
    (None when rows do not map to lines: the error names the frame, `first_frame` being
    row 0's index in the run when the frames come a chunk at a time)."""
    _check_seq(path, frames, first_line, first_frame)
    _check_joint_target_valid(path, frames, first_line, first_frame)
    have = set(frames.column_names)
    canon = frames.select([f.name for f in FRAME_SCHEMA if f.name in have])
    if not passes_rules(canon, schema_version):
        pandera_validate(path, canon, frames, schema_version, first_line, first_frame)


def pandera_validate(path: Path, canon: pa.Table, frames: pa.Table,
                     schema_version: int | None, first_line: int | None,
                     first_frame: int = 0) -> None:
    """Validate `canon` by the pandera schema; IngestError naming the first failure."""
    import pandera.polars as pap
    import polars as pl

    try:
        frame_schema(schema_version).validate(pl.from_arrow(canon, rechunk=False), lazy=True)
    except pap.errors.SchemaErrors as exc:
        raise _first_failure(path, exc.failure_cases, frames, first_line, first_frame) from None
    except pap.errors.SchemaError as exc:
        raise IngestError(path, str(exc).splitlines()[0], kind="schema") from None


def _where(first_line: int | None, index: int | None) -> int | None:
    return None if first_line is None or index is None else first_line + int(index)


def _frame(frames: pa.Table, first_line: int | None, index: int | None, first_frame: int = 0) -> str:
    """Where a violation is when the source has no lines (a bag, Parquet, `.npz`): the
    frame's index and its `t_s`, else ""."""
    if first_line is not None or index is None or not 0 <= int(index) < frames.num_rows:
        return ""
    t = frames.column("t_s")[int(index)].as_py() if "t_s" in frames.column_names else None
    return f" at frame {first_frame + int(index)}" + (f" (t_s {t:.6f} s)" if t is not None else "")


def _first_failure(path: Path, cases: pl.DataFrame, frames: pa.Table,
                   first_line: int | None, first_frame: int = 0) -> IngestError:
    rows = cases.sort("index", nulls_last=True).to_dicts()
    row = rows[0]
    column, check, index = row.get("column"), row.get("check"), row.get("index")
    value = row.get("failure_case")
    if check in ("column_in_dataframe", "column_in_schema"):
        return IngestError(path, "required column missing", field=column, kind="schema")
    if check and check.startswith("dtype"):
        return IngestError(path, f"wrong type {value}, expected {check}", field=column,
                           kind="schema")
    msg = f"value {value} fails {check}"
    if column and column[:1] == "q" and column[1:].isdigit():
        msg = f"value {value} is outside the joint's physical limits (expected {check})"
    elif column and column.startswith("dq") and column[2:].isdigit():
        msg = f"value {value} is beyond the joint velocity bound (expected {check})"
    elif check == "a finite number" or (check == "not_nullable" and value not in (None, "null")):
        msg = f"value {value} is not finite (expected a finite number)"  # polars: NaN ~ null
    elif check == "not_nullable":
        msg = "value missing (expected a number on every row)"
    return IngestError(path, msg + _frame(frames, first_line, index, first_frame),
                       line=_where(first_line, index), field=column, kind="value")


def _check_seq(path: Path, frames: pa.Table, first_line: int | None, first_frame: int = 0) -> None:
    seq = frames.column("seq").to_numpy()
    if len(seq) < 2:
        return
    step = np.diff(seq)
    bad = np.flatnonzero(step <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        what = (f"duplicate seq {int(seq[i])}" if step[i - 1] == 0 else
                f"seq not strictly increasing: {int(seq[i])} after {int(seq[i - 1])}")
        raise IngestError(path, what + _frame(frames, first_line, i, first_frame),
                          line=_where(first_line, i), field="seq", kind="seq")


def _check_joint_target_valid(path: Path, frames: pa.Table, first_line: int | None,
                              first_frame: int = 0) -> None:
    jtv, controller = frames.column("joint_target_valid"), frames.column("controller")
    if jtv.null_count == len(jtv):
        return
    mismatch = pc.not_equal(pc.equal(jtv, 1), pc.equal(controller, JOINT_IMPEDANCE))
    i = pc.index(pc.fill_null(mismatch, False), True).as_py()
    if i >= 0:
        raise IngestError(path, f"joint_target_valid={jtv[i].as_py()} with controller="
                          f"{controller[i].as_py()} (1 only under joint impedance, 2)"
                          + _frame(frames, first_line, i, first_frame),
                          line=_where(first_line, i), field="joint_target_valid",
                          kind="consistency")
