"""sim's modules import each other without a cycle, and reach outside sim only where listed."""

import ast
from pathlib import Path

import pytest

import twinlake.sim

SIM_DIR = Path(twinlake.sim.__file__).resolve().parent
# imports of ours from outside sim, by module: only the shared ground below it (contracts: the lazy
# public face, the JSON file reader); anything else is a dependency the package docs do not allow
OUTSIDE_SIM: dict[str, set[str]] = {"__init__": {"..contracts.lazy"}, "params": {"..contracts.jsonfile"}}


def imports_of(path: Path) -> tuple[set[str], set[str]]:
    """(sim modules, other twinlake modules) that the file at `path` imports, anywhere in it
    (function-level imports count: they close a cycle at run time just the same)."""
    inside, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # from .x import y / from . import x
            inside.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            continue
        if isinstance(node, ast.ImportFrom) and node.level > 1:  # from .. import x: out of sim
            outside.add("." * node.level + (node.module or ""))
            continue
        if isinstance(node, ast.ImportFrom):
            names = [node.module]
            if node.module == "twinlake.sim":  # from twinlake.sim import callback
                inside.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for parts in (name.split(".") for name in names):
            if parts[0] != "twinlake":
                continue
            if parts[1:2] == ["sim"]:
                inside.update(parts[2:3])
            else:
                outside.add(".".join(parts))
    return inside, outside


def import_graph(folder: Path) -> dict[str, set[str]]:
    modules = {p.stem for p in folder.glob("*.py")}
    graph = {}
    for path in sorted(folder.glob("*.py")):
        inside, _ = imports_of(path)
        graph[path.stem] = {m for m in inside if m in modules and m != path.stem}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_relative_absolute_and_function_level_imports(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\nfrom .c import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from twinlake.sim.a import y\n")
    (tmp_path / "c.py").write_text("import numpy\nfrom twinlake.catalog import Lake\n")
    graph = import_graph(tmp_path)
    assert graph == {"a": {"b", "c"}, "b": {"a"}, "c": set()}
    assert find_cycle(graph) == ["a", "b", "a"]
    assert imports_of(tmp_path / "c.py")[1] == {"twinlake.catalog"}


def test_sim_has_no_import_cycle():
    graph = import_graph(SIM_DIR)
    assert {"model", "callback", "kernels", "controllers", "fr3"} <= set(graph)
    assert find_cycle(graph) is None, f"import cycle in sim: {' -> '.join(find_cycle(graph))}"


def test_the_fr3_constants_and_the_context_layout_are_ground_floor():
    graph = import_graph(SIM_DIR)
    assert graph["fr3"] == set() and graph["replay_context"] == set()


@pytest.mark.parametrize("path", sorted(SIM_DIR.glob("*.py")), ids=lambda p: p.name)
def test_sim_reaches_outside_sim_only_where_listed(path):
    _, outside = imports_of(path)
    assert outside <= OUTSIDE_SIM.get(path.stem, set()), f"{path.name} imports {sorted(outside)}"
