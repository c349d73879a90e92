"""The compiled CSV v2 formatter writes the bytes of the Python one (`%.12g`, `%d`)."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.daemon import csv_v2 as C
from twinlake.daemon.csv_text import format_rows_bytes


def _python_lines(values: np.ndarray) -> bytes:
    return "".join(",".join("%.12g" % x for x in row) + "\n" for row in values.tolist()).encode()


def _hard_values(rng: np.random.Generator) -> np.ndarray:
    """Doubles over the whole range, decimal ties at the 13th digit, the specials, boundaries."""
    wide = rng.normal(size=60000) * 10.0 ** rng.uniform(-30, 40, size=60000)
    ties = [float(f"{rng.integers(10**11, 10**12)}5e{e}") for e in rng.integers(-25, 25, 5000)]
    near = [float(f"{d}.{rng.integers(0, 10**10):010d}{rng.integers(45, 55)}") for d in rng.integers(1, 10, 5000)]
    special = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 5e-324, 1e-320, 1.7976931348623157e308, 0.1,
               0.001 * 1234, 1e12, -1e12, 999999999999.5, 999999999999.4, 99999999999.95, 1e-5, 1e-4, 0.0001234,
               123456789012.5, 1e-11, 9.99999999999e-12, 1e34, 9.9999999999995e33, 1e100, -2.5e-300]
    return np.concatenate([wide, ties, near, special, rng.normal(size=20000)])


def test_doubles_match_python_percent_g():
    values = _hard_values(np.random.default_rng(7))
    values = values[: len(values) // 10 * 10].reshape(-1, 10)
    assert format_rows_bytes(values, np.zeros(10, bool)) == _python_lines(values)


def test_integer_columns_are_truncated_as_python_int():
    values = np.array([[3.0, -0.0, 2.7, -2.7, 12345678901.0, -9.0, 0.0, 2.0**53]])
    expected = (",".join("%d" % x for x in values[0].tolist()) + "\n").encode()
    assert format_rows_bytes(values, np.ones(8, bool)) == expected


def test_frames_match_format_rows():
    rng = np.random.default_rng(3)
    rows = C.empty_frames(500)
    rows[:] = rng.normal(size=rows.shape) * 10.0 ** rng.uniform(-6, 3, size=rows.shape)
    for name in C.INT_COLUMNS:
        rows[:, C.COLUMNS.index(name)] = rng.integers(0, 5000, 500)
    rows[:, C.K_JOINT] = 600.0  # constant columns: the Python formatter's template path
    rows[7, 3] = np.nan
    assert C.format_rows_bytes(rows) == C.format_rows(rows).encode()
    assert C.format_rows_bytes(rows[:1]) == C.format_rows(rows[:1]).encode()
    assert C.format_rows_bytes(rows[:0]) == b""


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match=r"expected shape \(n, 80\)"):
        C.format_rows_bytes(np.zeros((2, 79)))
    rows = C.empty_frames(2)
    rows[1, C.SEQ] = np.nan
    with pytest.raises(ValueError, match="integer column holds a non-finite value"):
        C.format_rows_bytes(rows)
    rows[1, C.SEQ] = 1e19
    with pytest.raises(ValueError, match="beyond"):
        C.format_rows_bytes(rows)
