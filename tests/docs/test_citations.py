"""The product cites public upstream sources (fr3_stack's and FrankaTwin's files, papers) or
its own docs, never private working notes or machine paths: a section sign must follow the
document it points into (`docs/daemon.md §3`), and no text names a notes folder or a seed
document."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".md", ".sql", ".toml", ".xml", ".json", ".txt", ".cfg", ".capnp"}
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache"}
FORBIDDEN = [
    (re.compile(r"\.\./shared|/work/"), "a machine path"),
    (re.compile(r"\bspecs?/|\bspecs? §"), "a private spec"),
    (re.compile(r"\bseeds?/|\bseed 0\d\d\b"), "a private seed document"),
]
SECTION = re.compile(r"§")
DOC_BEFORE_SECTION = re.compile(r"\.(md|txt|capnp|py)`?\)?\s*$")


def product_files() -> list[Path]:
    """The files git tracks with a checked suffix: what the product ships, never a virtual
    environment, cache or build output inside the checkout whatever its name. Outside a git
    checkout (an unpacked sdist) every file under the root but the usual tool folders and any
    folder holding a `pyvenv.cfg`."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                                capture_output=True).stdout.decode().split("\0")
        candidates = [ROOT / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        venvs = {cfg.parent for cfg in ROOT.rglob("pyvenv.cfg")}
        candidates = [p for p in ROOT.rglob("*") if not SKIP_DIRS & set(p.relative_to(ROOT).parts)
                      and not any(v in p.parents for v in venvs)]
    return sorted(p for p in candidates if p.suffix in SUFFIXES and p.is_file())


def citation_problems(text: str) -> list[str]:
    """What in `text` cites something a user cannot read, one message per finding. A bare
    `§N` is a reference into the document itself when it has a numbered heading `## N.`."""
    own_sections = set(re.findall(r"^#+\s*(\d+[a-z]?)\.", text, re.MULTILINE))
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in FORBIDDEN:
            if pattern.search(line):
                problems.append(f"line {number}: {what}: {line.strip()[:100]}")
        for match in SECTION.finditer(line):
            number_after = re.match(r"\s*(\d+[a-z]?)", line[match.end():])
            if number_after and number_after.group(1) in own_sections:
                continue
            if not DOC_BEFORE_SECTION.search(line[:match.start()]):
                problems.append(f"line {number}: a section sign without the document it points into: "
                                f"{line.strip()[:100]}")
    return problems


def test_the_checker_finds_what_it_forbids() -> None:
    assert citation_problems("see specs §4.1") and citation_problems("(§4)")
    assert citation_problems("from ../shared/DESIGN.md") and citation_problems("seed 001 says")
    assert not citation_problems("docs/daemon.md §3 and --seed 0 and fr3_stack's joint_sysid.py")
    assert not citation_problems("## 2a. A section\n\nas in §2a") and citation_problems("## 2a. A\n\nsee §3")


def test_no_file_cites_private_notes_or_machine_paths() -> None:
    found = []
    for path in product_files():
        if path == Path(__file__).resolve():
            continue
        for problem in citation_problems(path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{path.relative_to(ROOT)}: {problem}")
    assert not found, "\n".join(found)
