"""The root package composes the folders, never the other way round (docs/architecture.md):
a source scan of every folder's imports, and what `twinlake --help` loads."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("catalog", "ingest", "sim", "daemon", "fit", "campaign")
ROOT_MODULES = {"cli", "commands", "demo", "replay", "synthetic", "options", "clidoc", "option_lists"}
# folder -> the packages of ours it may import besides itself and `twinlake` (the version); the
# ground floor's shared leaf modules `sim.jsonfile` and `sim.lazy` count as sim
ALLOWED = {
    "catalog": {"sql"},
    "sim": set(),
    "ingest": {"catalog", "sim"},
    "daemon": {"sim", "catalog"},
    "fit": {"catalog", "sim"},
    "campaign": {"catalog", "sim", "fit", "daemon"},  # above fit: reads fits, the daemon's reference.csv
}


def _imports_of_ours(path: Path, folder: str) -> set[str]:
    """The first component after `twinlake.` of every import in `path` (relative imports
    resolve inside `folder`, so a `from ..x` leaving it is reported as `..`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                found.add("..")
                continue
            names = [] if node.level == 1 else [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "twinlake":
                found.add(parts[1] if len(parts) > 1 else "twinlake")
    found.discard(folder)
    return found


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_imports_only_what_the_architecture_allows(folder):
    wrong = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        if path.name == "__main__.py":  # `python -m twinlake.ingest`: an entry point into the root
            continue
        extra = _imports_of_ours(path, folder) - ALLOWED[folder] - {"twinlake"}
        if extra:
            wrong[str(path.relative_to(REPO))] = sorted(extra)
    assert wrong == {}, f"imports against the grain: {wrong}"


def test_no_folder_holds_command_line_code():
    for folder in FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            assert not path.stem.endswith("cli"), path
            if path.name != "__main__.py":
                assert not (_imports_of_ours(path, folder) & ROOT_MODULES), path


def test_help_loads_no_folder_but_the_catalog():
    code = ("import sys, twinlake.cli; print(' '.join(sorted({m.split('.')[1] for m in sys.modules "
            "if m.startswith('twinlake.')})), '|', ' '.join(m for m in ('mujoco', 'numba', 'zmq', 'capnp', "
            "'ray', 'cma', 'scipy', 'pandera') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ours, heavy = (part.split() for part in out.stdout.split("|"))
    assert set(ours) <= ROOT_MODULES | {"catalog"}, ours  # catalog: the intervals' rule names
    assert heavy == [], heavy
