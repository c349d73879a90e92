"""The root package composes the folders, never the other way round (docs/architecture.md): no
folder holds or imports command-line code, and `twinlake --help` loads no folder's code. The
folder-to-folder layering itself is tests/test_architecture.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from test_architecture import FOLDERS, _imports, _modules  # noqa: E402

ROOT_MODULES = {"cli", "commands", "demo", "demo_report", "replay", "synthetic", "options", "clidoc", "option_lists",
                "progress"}


def test_no_folder_holds_command_line_code():
    for name, path in _modules().items():
        folder = path.relative_to(REPO).parts[0]
        if folder not in FOLDERS or folder == "sql":
            continue
        assert not path.stem.endswith("cli"), path
        if path.name == "__main__.py":  # `python -m twinlake.ingest`: the one entry point into the root
            continue
        root_uses = {m.split(".")[1] for m in _imports(name, path) if m.count(".") >= 1} & ROOT_MODULES
        assert not root_uses, f"{path} imports the root's {sorted(root_uses)}"


def test_help_loads_no_folder_but_the_catalog_and_its_contracts():
    code = ("import sys, twinlake.cli; print(' '.join(sorted({m.split('.')[1] for m in sys.modules "
            "if m.startswith('twinlake.')})), '|', ' '.join(m for m in ('mujoco', 'numba', 'zmq', 'capnp', "
            "'ray', 'cma', 'scipy', 'pandera') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ours, heavy = (part.split() for part in out.stdout.split("|"))
    assert set(ours) <= ROOT_MODULES | {"catalog", "contracts"}, ours  # catalog: the intervals' rule names
    assert heavy == [], heavy
