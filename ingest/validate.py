"""Validation of canonical frames: a pandera schema (polars backend, zero-copy from Arrow)
for types, value sets and physical limits, plus Arrow-compute checks across rows (seq
strictly increasing) and columns (`joint_target_valid` ⇔ joint impedance).

Any violation raises `IngestError` naming the file, line and field. Only what makes the file
untrustworthy as a whole is a violation. A non-finite sample (NaN, ±inf: a sensor dropout in
`q`, `dq`, a target or a torque) is data: it passes here, is stored as recorded, counted per
column by `runstats` and excluded tick by tick by the intervals SQL (`nonfinite`). Limits
apply to finite values only. `t_s` (the time axis every tick is placed on) must be finite.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandera.polars as pap
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog import FRAME_SCHEMA, JOINTS
from .registry import IngestError

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

_PL_TYPES = {pa.int64(): pl.Int64, pa.int32(): pl.Int32, pa.int8(): pl.Int8,
             pa.float64(): pl.Float64, pa.bool_(): pl.Boolean}


def _within_when_finite(lo: float, hi: float, unit: str) -> pap.Check:
    """Finite values in [lo, hi]; NaN, ±inf and null pass (non-finite samples are data)."""

    def check(data: pap.PolarsData) -> pl.LazyFrame:
        col = pl.col(data.key)
        return data.lazyframe.select(col.is_between(lo, hi) | ~col.is_finite())

    return pap.Check(check, name="within_when_finite",
                     error=f"finite values within [{lo:.4f}, {hi:.4f}] {unit}")


def _finite() -> pap.Check:
    def check(data: pap.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col(data.key).is_finite())

    return pap.Check(check, name="finite", error="a finite number")


def _column_checks(name: str, schema_version: int | None) -> tuple[list, bool]:
    """(checks, nullable) for one canonical column."""
    for j in range(1, JOINTS + 1):
        if name == f"q{j}":
            lo, hi = Q_MIN[j - 1] - Q_MARGIN_RAD, Q_MAX[j - 1] + Q_MARGIN_RAD
            return [_within_when_finite(float(lo), float(hi), "rad")], True
        if name == f"dq{j}":
            return [_within_when_finite(-DQ_MAX_RAD_S, DQ_MAX_RAD_S, "rad/s")], True
    if name == "seq":
        return [pap.Check.ge(0)], False
    if name == "t_s":
        return [_finite()], False
    if name == "controller":
        return [pap.Check.isin(CONTROLLERS)], True
    if name == "joint_target_valid":
        return [pap.Check.isin([0, 1])], True
    if name == "schema_version" and schema_version is not None:
        return [pap.Check.isin([schema_version])], True
    return [], True


@lru_cache(maxsize=8)
def frame_schema(schema_version: int | None) -> pap.DataFrameSchema:
    """The pandera (polars) schema of canonical frames; extra columns are allowed."""
    columns = {}
    for field in FRAME_SCHEMA:
        checks, nullable = _column_checks(field.name, schema_version)
        columns[field.name] = pap.Column(_PL_TYPES[field.type], checks=checks,
                                         nullable=nullable, required=True)
    return pap.DataFrameSchema(columns, strict=False, name="frames")


def validate_frames(path: Path, frames: pa.Table, schema_version: int | None,
                    first_line: int | None = 2) -> None:
    """Raise IngestError for the first violation; `first_line` is the file line of row 0
    (None when rows do not map to lines)."""
    _check_seq(path, frames, first_line)
    _check_joint_target_valid(path, frames, first_line)
    canon = frames.select([f.name for f in FRAME_SCHEMA if f.name in frames.column_names])
    try:
        frame_schema(schema_version).validate(pl.from_arrow(canon, rechunk=False), lazy=True)
    except pap.errors.SchemaErrors as exc:
        raise _first_failure(path, exc.failure_cases, frames, first_line) from None
    except pap.errors.SchemaError as exc:
        raise IngestError(path, str(exc).splitlines()[0], kind="schema") from None


def _where(first_line: int | None, index: int | None) -> int | None:
    return None if first_line is None or index is None else first_line + int(index)


def _first_failure(path: Path, cases: pl.DataFrame, frames: pa.Table,
                   first_line: int | None) -> IngestError:
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
    return IngestError(path, msg, line=_where(first_line, index), field=column, kind="value")


def _check_seq(path: Path, frames: pa.Table, first_line: int | None) -> None:
    seq = frames.column("seq").to_numpy()
    if len(seq) < 2:
        return
    step = np.diff(seq)
    bad = np.flatnonzero(step <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        what = (f"duplicate seq {int(seq[i])}" if step[i - 1] == 0 else
                f"seq not strictly increasing: {int(seq[i])} after {int(seq[i - 1])}")
        raise IngestError(path, what,
                          line=_where(first_line, i), field="seq", kind="seq")


def _check_joint_target_valid(path: Path, frames: pa.Table, first_line: int | None) -> None:
    jtv, controller = frames.column("joint_target_valid"), frames.column("controller")
    if jtv.null_count == len(jtv):
        return
    mismatch = pc.not_equal(pc.equal(jtv, 1), pc.equal(controller, JOINT_IMPEDANCE))
    i = pc.index(pc.fill_null(mismatch, False), True).as_py()
    if i >= 0:
        raise IngestError(path, f"joint_target_valid={jtv[i].as_py()} with controller="
                          f"{controller[i].as_py()} (1 only under joint impedance, 2)",
                          line=_where(first_line, i), field="joint_target_valid",
                          kind="consistency")
