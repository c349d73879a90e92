"""One CSV v2 column list for the daemon and ingest, and the test plant's own copy agrees with it.

tests/plant writes CSV v2 with an independent definition (it shares no code with the product),
so a change to the shared list that fr3_stack did not make shows up here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the `plant` package

from plant import csv_v2 as plant_csv  # noqa: E402

from twinlake.contracts import csv_v2  # noqa: E402
from twinlake.daemon import csv_v2 as daemon_csv  # noqa: E402
from twinlake.ingest.fr3_stack import recording_csv  # noqa: E402


def test_the_plant_writes_the_columns_the_product_defines():
    assert plant_csv.COLUMNS == csv_v2.COLUMNS
    assert plant_csv.LEGACY_COLUMNS == csv_v2.LEGACY_COLUMNS
    assert plant_csv.INTEGER_COLUMNS == csv_v2.INTEGER_COLUMNS


def test_daemon_and_ingest_read_the_one_definition():
    assert daemon_csv.COLUMNS is csv_v2.COLUMNS
    assert daemon_csv.INT_COLUMNS is csv_v2.INTEGER_COLUMNS
    assert recording_csv.V2_COLUMNS is csv_v2.COLUMNS
    assert recording_csv.V1_COLUMNS is csv_v2.LEGACY_COLUMNS
    assert daemon_csv.HEADER == ",".join(plant_csv.COLUMNS) + "\n"
