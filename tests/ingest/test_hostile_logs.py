"""Hostile mapped logs (.npz written by numpy, Parquet by Arrow, CSV text), mapping files and
companions: each refused with one line naming the file, the array, column, line or frame and
what was expected, or published with nothing lost (an empty cell is null, "not recorded");
an aborted excitation is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest_helpers import frames_of, refused_one_line, runs_of

N = 400
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
NPZ_MAPPING = '[time]\ncolumn = "t"\nunit = "ms"\n\n[columns]\nq = "q"\ndq = "dq"\n'
CSV_MAPPING = '[time]\ncolumn = "time_ms"\nunit = "ms"\n\n[columns]\nq = "q{j}"\ndq = "dq{j}"\n'


def _motion(n: int = N) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    q = HOME + 0.1 * np.sin(2 * np.pi * 0.5 * t[:, None] / 1000 + np.arange(7))
    return t, q, np.gradient(q, axis=0) * 1000


def _mapping(inbox: Path, text: str, name: str = "map.toml") -> Path:
    path = inbox / name
    path.write_text(text)
    return path


def _csv_text(n: int = N) -> str:
    t, q, dq = _motion(n)
    header = ["time_ms"] + [f"q{j}" for j in range(1, 8)] + [f"dq{j}" for j in range(1, 8)]
    rows = np.column_stack([t, q, dq])
    return ",".join(header) + "\n" + "\n".join(",".join(repr(float(v)) for v in r) for r in rows) + "\n"


def _npz(inbox: Path, name: str, **change) -> Path:
    t, q, dq = _motion()
    arrays = {"t": t, "q": q, "dq": dq} | change
    path = inbox / name
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("name, change, words", [
    ("objects.npz", {"q": _motion()[1].astype(object)}, ("array 'q' cannot be read", "Object arrays")),
    ("text.npz", {"q": np.full((N, 7), "x")}, ("array 'q' holds <U1 values", "expected real numbers")),
    ("complex.npz", {"q": _motion()[1] + 0.5j}, ("array 'q' holds complex128 values", "expected real numbers")),
], ids=["object", "text", "complex"])
def test_an_npz_array_that_is_not_real_numbers_isrefused_one_line(inbox, lake, ingest, name, change, words):
    path = _npz(inbox, name, **change)
    refused_one_line(ingest(path, "--mapping", _mapping(inbox, NPZ_MAPPING), "--robot", "fr3"), lake,
             f"{name}:", *words)


def test_an_npz_with_a_corrupt_member_is_refused_naming_it(inbox, lake, ingest):
    path = _npz(inbox, "crc.npz")
    data = bytearray(path.read_bytes())
    data[300] ^= 0xFF  # inside the first member's bytes: its CRC-32 no longer matches
    path.write_bytes(bytes(data))
    refused_one_line(ingest(path, "--mapping", _mapping(inbox, NPZ_MAPPING), "--robot", "fr3"), lake,
             "crc.npz:", "array 't' cannot be read", "Bad CRC-32")


@pytest.mark.parametrize("data, words", [
    (NPZ_MAPPING.encode("utf-16"), ("map.toml:", "not UTF-8 text: byte 0xff at offset 0", "UTF-16")),
    (b"\xff\xfe\x00bad", ("map.toml:", "not UTF-8 text", "expected a UTF-8 TOML file")),
], ids=["utf16", "bytes"])
def test_a_mapping_that_is_not_utf8_isrefused_one_line(inbox, lake, ingest, data, words):
    mapping = inbox / "map.toml"
    mapping.write_bytes(data)
    refused_one_line(ingest(_npz(inbox, "log.npz"), "--mapping", mapping, "--robot", "fr3"), lake, *words)


def test_a_byte_order_mark_is_not_part_of_the_first_name(inbox, lake, ingest):
    mapping = inbox / "map.toml"
    mapping.write_bytes(b"\xef\xbb\xbf" + CSV_MAPPING.encode())
    log = inbox / "bom.csv"
    log.write_bytes(b"\xef\xbb\xbf" + _csv_text().encode())
    res = ingest(log, "--mapping", mapping, "--robot", "fr3")
    assert res.exit_code == 0, res.output
    assert runs_of(lake)[0]["frame_count"] == N


def test_a_header_not_in_utf8_is_named_as_such(inbox, lake, ingest):
    text = _csv_text().replace("time_ms", "time_\u00b5s", 1)
    log = inbox / "latin.csv"
    log.write_bytes(text.encode("latin-1"))
    mapping = _mapping(inbox, CSV_MAPPING.replace("time_ms", "time_\u00b5s").replace('"ms"', '"us"'))
    refused_one_line(ingest(log, "--mapping", mapping, "--robot", "fr3"), lake, "latin.csv:",
             "names column 'time_\u00b5s'", "its header is not UTF-8 text", "save it as UTF-8")


def test_an_empty_csv_cell_is_null_not_nan(inbox, lake, ingest):
    lines = _csv_text().split("\n")
    cells = lines[11].split(",")
    cells[3] = ""  # q3 of the row on line 12
    lines[11] = ",".join(cells)
    log = inbox / "gap.csv"
    log.write_text("\n".join(lines))
    res = ingest(log, "--mapping", _mapping(inbox, CSV_MAPPING), "--robot", "fr3")
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert "nonfinite" not in run["flags"] and run["nonfinite_frames"] == []
    assert any("'q3': 1 empty cells, first at line 12" in r for r in run["reasons"])
    q3 = frames_of(lake).column("q3")
    assert q3.null_count == 1 and q3[10].as_py() is None
    assert not np.isnan(q3.drop_null().to_numpy()).any()


def test_a_null_parquet_cell_is_null_and_a_bad_value_names_its_frame(inbox, lake, ingest, tmp_path):
    t, q, dq = _motion()
    cols = {"t": pa.array(t)} | {f"q{j}": pa.array(q[:, j - 1]) for j in range(1, 8)} \
        | {f"dq{j}": pa.array(dq[:, j - 1]) for j in range(1, 8)}
    cols["dq2"] = pa.array([None if i == 5 else v for i, v in enumerate(dq[:, 1])], pa.float64())
    pq.write_table(pa.table(cols), inbox / "nulls.parquet")
    mapping = _mapping(inbox, NPZ_MAPPING.replace('"q"', '"q{j}"').replace('"dq"', '"dq{j}"'))
    res = ingest(inbox / "nulls.parquet", "--mapping", mapping, "--robot", "fr3")
    assert res.exit_code == 0, res.output
    assert frames_of(lake).column("dq2")[5].as_py() is None
    assert any("'dq2': 1 empty cells, first at row 5" in r for r in runs_of(lake)[0]["reasons"])
    cols["q4"] = pa.array(np.where(np.arange(N) == 37, 9.0, q[:, 3]))
    pq.write_table(pa.table(cols), inbox / "far.parquet")
    refused_one_line(ingest(inbox / "far.parquet", "--mapping", mapping, "--robot", "fr3",
                    lake_dir=tmp_path / "lake2"), type(lake)(tmp_path / "lake2"),
             "far.parquet:", "'q4'", "outside the joint's physical limits", "at frame 37 (t_s 0.037000 s)")


def test_an_aborted_excitation_is_flagged_not_ok(make_csv, lake, ingest):
    path = make_csv("aborted.csv", meta={"robot_id": "fr3", "excitation_status": "aborted"})
    res = ingest(path)
    assert res.exit_code == 0, res.output
    run = runs_of(lake)[0]
    assert run["verdict"] == "flagged" and "aborted" in run["flags"]
    assert run["aborted"] is True and run["excitation_status"] == "aborted"
    assert any("excitation ended 'aborted'" in r for r in run["reasons"])
    json.loads(run["metadata_json"])  # kept verbatim
