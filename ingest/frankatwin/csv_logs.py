"""FrankaTwin CSV layouts and their pure readers into canonical Arrow tables.

Source: FrankaTwin's data-format docs (docs/formats.md). Four CSV layouts, all written by FrankaTwin with
a plain header line (no `#`), `,` delimiter:

- 50 Hz real log (`cart_impedance.py --log`): 47 columns, every value `%.9f`.
- 1 kHz ring log merged CSV: the same 47 columns then `seq`, `target_idx` (`%d`): 49.
- ring-log targets CSV `<stem>_targets.csv`: `target_idx, head, seq_effective` (`%d`) then
  the 7 setpoint columns (`%.9f`).
- target CSV (`scripts/gen_*_traj.py`): `t_s`, `x_des_*`, `dx_des_*`, `quat_des_*`.
- sim CSV (`replay_python_csv_sim.py`): 44 columns (see `SIM_COLUMNS`).

Each reader returns canonical frame columns (catalog FRAME_SCHEMA names, SI units, xyzw);
a column the source did not record is null, never zero. Column mapping (docs/formats.md):
`x_*`→`ee_p*`, `quat_*`→`ee_q*`, `x_des_*`→`tgt_p*`, `quat_des_*`→`tgt_q*`, `tau*`→`tau_cmd*`,
`tau_J*`→`tau_J*`, `period_ms`→`control_period_s` (÷1000); `dx_des_*`→extra `tgt_vx..tgt_vz`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..source_io import describe_mismatch, read_header, read_typed_csv

J = range(1, 8)
XYZ = ("x", "y", "z")
XYZW = ("x", "y", "z", "w")

LOG_COLUMNS: tuple[str, ...] = (
    ("t_s", "period_ms")
    + tuple(f"q{j}" for j in J) + tuple(f"dq{j}" for j in J)
    + tuple(f"x_{a}" for a in XYZ) + tuple(f"quat_{a}" for a in XYZW)
    + tuple(f"x_des_{a}" for a in XYZ) + tuple(f"dx_des_{a}" for a in XYZ)
    + tuple(f"quat_des_{a}" for a in XYZW)
    + tuple(f"tau{j}" for j in J) + tuple(f"tau_J{j}" for j in J)
)
"""The 47 columns of the 50 Hz log, in file order."""

RING_COLUMNS: tuple[str, ...] = LOG_COLUMNS + ("seq", "target_idx")
"""The 49 columns of the 1 kHz ring-log merged CSV."""

TARGETS_COLUMNS: tuple[str, ...] = (
    ("target_idx", "head", "seq_effective")
    + tuple(f"x_des_{a}" for a in XYZ) + tuple(f"quat_des_{a}" for a in XYZW)
)
"""The 10 columns of `<stem>_targets.csv`."""

TARGET_CSV_COLUMNS: tuple[str, ...] = (
    ("t_s",) + tuple(f"x_des_{a}" for a in XYZ) + tuple(f"dx_des_{a}" for a in XYZ)
    + tuple(f"quat_des_{a}" for a in XYZW)
)
"""The 11 columns of a generated target CSV (`gen_*_traj.py`)."""

SIM_COLUMNS: tuple[str, ...] = (
    ("t_s",) + tuple(f"q{j}" for j in J) + tuple(f"dq{j}" for j in J)
    + tuple(f"x_{a}" for a in XYZ) + tuple(f"dx_{a}" for a in XYZ)
    + tuple(f"quat_{a}" for a in XYZW) + ("wx", "wy", "wz")
    + tuple(f"x_des_{a}" for a in XYZ) + tuple(f"dx_des_{a}" for a in XYZ)
    + tuple(f"quat_des_{a}" for a in XYZW)
    + ("e_x", "e_y", "e_z", "e_ox", "e_oy", "e_oz")
)
"""The 44 columns of a FrankaTwin sim replay CSV."""

INT_COLUMNS = frozenset({"seq", "target_idx", "head", "seq_effective"})

# FrankaTwin name -> canonical name (shared by every layout that has the column).
RENAME: dict[str, str] = {
    **{f"x_{a}": f"ee_p{a}" for a in XYZ},
    **{f"quat_{a}": f"ee_q{a}" for a in XYZW},
    **{f"x_des_{a}": f"tgt_p{a}" for a in XYZ},
    **{f"quat_des_{a}": f"tgt_q{a}" for a in XYZW},
    **{f"dx_des_{a}": f"tgt_v{a}" for a in XYZ},
    **{f"tau{j}": f"tau_cmd{j}" for j in J},
    **{f"dx_{a}": f"ee_v{a}" for a in XYZ},
    **{f"w{a}": f"ee_w{a}" for a in XYZ},
    **{f"e_{a}": f"err_p{a}" for a in XYZ},
    **{f"e_o{a}": f"err_o{a}" for a in XYZ},
}

CONTROLLER_CARTESIAN = 1
"""fr3_stack ControllerType enum value for Cartesian impedance (FrankaTwin's only law)."""


def layout_of(header: list[str]) -> str | None:
    """Which FrankaTwin CSV layout a header line is: 'log50', 'ring', 'targets', 'target',
    'sim', or None."""
    cols = tuple(header)
    for name, expected in (("log50", LOG_COLUMNS), ("ring", RING_COLUMNS),
                           ("targets", TARGETS_COLUMNS), ("target", TARGET_CSV_COLUMNS),
                           ("sim", SIM_COLUMNS)):
        if cols == expected:
            return name
    return None


def _read(path: Path, columns: tuple[str, ...]) -> pa.Table:
    header = read_header(path)
    if tuple(header) != columns:
        from ..registry import IngestError

        raise IngestError(path, f"header does not match: {describe_mismatch(header, columns)}",
                          line=1)
    types = {c: (pa.int64() if c in INT_COLUMNS else pa.float64()) for c in columns}
    return read_typed_csv(path, types)


def _canonical(raw: pa.Table, drop: tuple[str, ...] = ()) -> pa.Table:
    """Rename FrankaTwin columns to canonical names; keep the rest; drop `drop`."""
    names = [RENAME.get(c, c) for c in raw.column_names]
    table = raw.rename_columns(names)
    keep = [c for c in table.column_names if c not in drop]
    return table.select(keep)


def _tau_j_nan_to_null(table: pa.Table) -> pa.Table:
    """`tau_J*` is NaN when the daemon did not provide it (pre shm v3, or before the first
    frame): that is "not recorded", so it becomes null. Other NaNs are kept as NaN."""
    for j in J:
        name = f"tau_J{j}"
        if name in table.column_names:
            col = table[name]
            fixed = pc.if_else(pc.is_nan(col), pa.scalar(None, pa.float64()), col)
            table = table.set_column(table.schema.get_field_index(name), name, fixed)
    return table


def _with(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in table.column_names:
        return table.set_column(table.schema.get_field_index(name), name, values)
    return table.append_column(name, values)


def _constant(n: int, value, typ: pa.DataType) -> pa.Array:
    return pa.array(np.full(n, value), type=typ) if value is not None else pa.nulls(n, typ)


def read_log50(path: Path, schema_version: int | None = 2) -> pa.Table:
    """50 Hz log → canonical frames. `seq` = loop iteration k (`t_s = k / rate` by
    construction), `control_period_s` = `period_ms / 1000` (the *Python loop* period, about
    20 ms, not a 1 kHz callback period), `controller` = 1."""
    raw = _read(path, LOG_COLUMNS)
    n = raw.num_rows
    period_s = pc.divide(raw["period_ms"], 1000.0)
    table = _canonical(raw, drop=("period_ms",))
    table = _tau_j_nan_to_null(table)
    table = _with(table, "seq", pa.array(np.arange(n, dtype=np.int64)))
    table = _with(table, "control_period_s", period_s)
    return _stamp(table, schema_version)


def _stamp(table: pa.Table, schema_version: int | None) -> pa.Table:
    n = table.num_rows
    table = _with(table, "controller", _constant(n, CONTROLLER_CARTESIAN, pa.int32()))
    return _with(table, "schema_version", _constant(n, schema_version, pa.int32()))


def read_ring(path: Path, schema_version: int | None = 2) -> pa.Table:
    """1 kHz ring-log merged CSV → canonical frames, sorted by `seq` as written.
    `control_period_s` = `period_ms / 1000` (osc_shm monotonic stamps; 0 on row 0),
    `target_idx` kept (-1 = start snapshot)."""
    raw = _read(path, RING_COLUMNS)
    period_s = pc.divide(raw["period_ms"], 1000.0)
    table = _canonical(raw, drop=("period_ms",))
    table = _tau_j_nan_to_null(table)
    table = _with(table, "control_period_s", period_s)
    return _stamp(table, schema_version)


def read_targets(path: Path) -> pa.Table:
    """`<stem>_targets.csv` → `targets.parquet` columns: `target_idx, head, seq_effective,
    tgt_px..tgt_qw` (one row per setpoint write)."""
    raw = _read(path, TARGETS_COLUMNS)
    return _canonical(raw)


def read_target_csv(path: Path, schema_version: int | None = None) -> pa.Table:
    """Generated target CSV → frames holding only the reference: `seq` = row index,
    `t_s`, `tgt_*`, `tgt_v*`; measured columns stay null (nothing was measured)."""
    raw = _read(path, TARGET_CSV_COLUMNS)
    table = _canonical(raw)
    table = _with(table, "seq", pa.array(np.arange(raw.num_rows, dtype=np.int64)))
    return _stamp(table, schema_version)


def read_sim(path: Path, schema_version: int | None = 1) -> pa.Table:
    """Sim replay CSV → frames: `seq` = row index, measured-like columns from the sim,
    extras `ee_vx..ee_vz`, `ee_wx..ee_wz`, `err_px..err_pz`, `err_ox..err_oz`; torques null
    (the sim CSV records none)."""
    raw = _read(path, SIM_COLUMNS)
    table = _canonical(raw)
    table = _with(table, "seq", pa.array(np.arange(raw.num_rows, dtype=np.int64)))
    return _stamp(table, schema_version)
