"""Every name bench/ takes from twinlake exists: a refactor that moves a module must move the
benches with it (they are not run by the suite, so nothing else would notice). Read with `ast`:
each `from twinlake... import NAME` (module level or inside a function) is resolved."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _imports(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "twinlake":
            out += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if a.name.split(".")[0] == "twinlake"]
    return out


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_name_a_bench_takes_from_twinlake_exists(path):
    missing = []
    for line, module, name in _imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"line {line}: {module} ({exc})")
            continue
        if name and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"line {line}: {module}.{name}")
    assert not missing, f"bench/{path.name}: " + "; ".join(missing)
