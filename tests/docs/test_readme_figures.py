"""README.md says what the product does and how to run it; measured figures live with their date
and load in bench/RESULTS.md, not in the README."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_has_no_dated_figure_and_points_to_the_results():
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a dated measurement belongs in bench/RESULTS.md"
    assert not re.search(r"\b\d+ of \d+ parameters\b", text) and not re.search(r"\d+(\.\d+)?× the (noise )?floor", text)
    assert "bench/RESULTS.md" in text
