"""Helpers shared by the ingest tests (the real CLI as a subprocess, lake read-back)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from twinlake.catalog import Lake, connect


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`twinlake ingest ...` as a real subprocess (`python -m twinlake.ingest`)."""
    return subprocess.run([sys.executable, "-m", "twinlake.ingest", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def column_bits(table: pa.Table) -> list[np.ndarray]:
    """Each column's values, a float64 column as its 64 bits (NaN and -0 compare exactly)."""
    return [c.to_numpy().view(np.uint64) if pa.types.is_float64(c.type) else c.to_numpy()
            for c in table.columns]


def frames_of(lake: Lake, where: str = "true"):
    return connect(lake).sql(f"SELECT * FROM frames WHERE {where} ORDER BY seq").to_arrow_table()


def runs_of(lake: Lake) -> list[dict]:
    con = connect(lake)
    rel = con.execute("SELECT * FROM runs ORDER BY robot, run")
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, row)) for row in rel.fetchall()]


def quarantined(lake: Lake) -> list[dict]:
    qdir = lake.quarantine_dir
    if not qdir.exists():
        return []
    return [json.loads((d / "reason.json").read_text()) for d in sorted(qdir.iterdir())]


def refused_one_line(result, lake: Lake, *words: str) -> str:
    """The one-line refusal of a CLI ingest (a typer `Result`): exit 1, no traceback, exactly one
    line saying "quarantined" that holds each of `words`, nothing published, one input in
    quarantine. Returns that line."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [x for x in result.output.splitlines() if "quarantined" in x]
    assert len(lines) == 1, result.output
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not lake.runs_dir.exists() or not any(lake.runs_dir.rglob("frames.parquet"))
    assert len(quarantined(lake)) == 1
    return lines[0]


def edit_cell(path, line_no: int, column: str, value: str) -> None:
    """Replace one cell of a CSV file in place: line `line_no` (1-based, the header is line 1),
    the column named `column` in the header, by the text `value`."""
    lines = path.read_text().split("\n")
    idx = lines[0].split(",").index(column)
    cells = lines[line_no - 1].split(",")
    cells[idx] = value
    lines[line_no - 1] = ",".join(cells)
    path.write_text("\n".join(lines))
