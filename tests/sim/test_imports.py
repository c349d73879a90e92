"""sim's modules import each other without a cycle, its sub-packages only down their floors, and
sim reaches outside itself only where listed."""

import ast
from pathlib import Path

import pytest

import twinlake.sim

SIM_DIR = Path(twinlake.sim.__file__).resolve().parent
# imports of ours from outside sim, by module (dotted, relative to sim): only the shared ground
# below it (contracts: the lazy public face, the JSON file reader); anything else is a
# dependency the package docs do not allow
OUTSIDE_SIM: dict[str, set[str]] = {"": {"twinlake.contracts.lazy"},
                                    "arm_model.params": {"twinlake.contracts.jsonfile"},
                                    "kernels.tick": {"twinlake.contracts.kernel_cache"},
                                    "kernels._callback_body": {"twinlake.contracts.kernel_cache"}}
# sim's floors, lowest first: the FR3's constants, the compiled kernels, the arm model, the
# replay engines, the one-arm simulation on top; a module imports only its own floor or lower
FLOORS = {"fr3": 0, "kernels": 1, "arm_model": 2, "replay": 3, "arm": 4}


def module_name(path: Path, root: Path) -> str:
    """`a.b` for root/a/b.py, `a` for root/a/__init__.py, "" for root/__init__.py."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path, package: str = "twinlake.sim") -> tuple[set[str], set[str]]:
    """(sim modules, other twinlake modules) that the file imports, anywhere in it (function-level
    imports count: they close a cycle at run time just the same); sim modules relative to sim."""
    name = module_name(path, root)
    here = [p for p in f"{package}.{name}".strip(".").split(".")]
    if path.name != "__init__.py":
        here = here[:-1]
    inside, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            if target == package or target.startswith(package + "."):
                rel = Path(*target[len(package) + 1:].split(".")) if target != package else Path()
                if (root / rel).with_suffix(".py").is_file() or (root / rel).is_dir():
                    inside.add(".".join(rel.parts))
        if targets[0].split(".")[0] == "twinlake" and not targets[0].startswith(package):
            outside.add(targets[0])  # the module itself, not each name taken from it
    return inside, outside


def import_graph(root: Path, package: str = "twinlake.sim") -> dict[str, set[str]]:
    graph = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        inside, _ = imports_of(path, root, package)
        graph[name] = {m for m in inside if m != name and (root / Path(*m.split("."))).with_suffix(".py").is_file()}
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


def test_the_graph_sees_relative_absolute_nested_and_function_level_imports(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\nfrom .c import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from twinlake.sim.a import y\n")
    (tmp_path / "c.py").write_text("import numpy\nfrom twinlake.catalog import Lake\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.py").write_text("from ..c import x\nfrom .e import y\n")
    (tmp_path / "sub" / "e.py").write_text("")
    graph = import_graph(tmp_path)
    assert graph == {"a": {"b", "c"}, "b": {"a"}, "c": set(), "sub.d": {"c", "sub.e"}, "sub.e": set()}
    assert find_cycle(graph) == ["a", "b", "a"]
    assert imports_of(tmp_path / "c.py", tmp_path)[1] == {"twinlake.catalog"}


def test_sim_has_no_import_cycle():
    graph = import_graph(SIM_DIR)
    assert {"arm_model.model", "kernels.callback", "kernels.tick", "arm_model.controllers", "fr3"} <= set(graph)
    assert find_cycle(graph) is None, f"import cycle in sim: {' -> '.join(find_cycle(graph))}"


def test_the_fr3_constants_and_the_context_layout_are_ground_floor():
    graph = import_graph(SIM_DIR)
    assert graph["fr3"] == set() and graph["kernels.replay_context"] == set()


def test_sim_imports_only_down_its_floors():
    up = [f"{src} -> {dst}" for src, targets in import_graph(SIM_DIR).items() if src
          for dst in targets if FLOORS[dst.split(".")[0]] > FLOORS[src.split(".")[0]]]
    assert not up, "sim imports up its floors " + str(FLOORS) + ":\n" + "\n".join(up)


@pytest.mark.parametrize("path", sorted(SIM_DIR.rglob("*.py")), ids=lambda p: p.relative_to(SIM_DIR).as_posix())
def test_sim_reaches_outside_sim_only_where_listed(path):
    _, outside = imports_of(path, SIM_DIR)
    name = module_name(path, SIM_DIR)
    assert outside <= OUTSIDE_SIM.get(name, set()), f"{name or '__init__'} imports {sorted(outside)}"
