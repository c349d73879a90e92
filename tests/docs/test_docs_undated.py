"""The docs and the folders' READMEs say what is true now: a dated measurement belongs in
bench/RESULTS.md (each figure there carries its date and load), not in a guide."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?![-\w])")  # a run id such as 2026-09-23-hold is a name, not a date
DOCS = sorted([*REPO.glob("docs/*.md"), *(p for p in REPO.glob("*/README.md") if p.parent.name != ".venv"),
               *REPO.glob("*/*/README.md"), *REPO.glob("*/*/*/README.md")])
DOCS = [p for p in DOCS if ".venv" not in p.parts and "bench" not in p.parts]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_a_doc_carries_no_dated_measurement(path):
    dated = [(n, line.strip()[:80]) for n, line in enumerate(path.read_text().splitlines(), 1) if DATE.search(line)]
    assert not dated, f"{path.relative_to(REPO)}: dated lines belong in bench/RESULTS.md: {dated}"


def test_the_rule_tells_a_date_from_a_run_id():
    assert DATE.search("measured 2026-12-05, load 2") and not DATE.search('run="2026-09-23-hold"')
