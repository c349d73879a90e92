"""The import graph between the repository's folders follows the declared layering
(docs/architecture.md): contracts below everything, catalog and sim on the ground floor, ingest and daemon above them, fit
above those, the root package `twinlake/` composing commands. The test reads every module's
imports with `ast` (nothing is imported), so it fails as soon as an arrow runs the wrong way
or a circle appears inside a folder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("contracts", "catalog", "sql", "sim", "ingest", "daemon", "fit", "campaign")
ROOT = "twinlake"

# folder -> the folders of ours it may import (the root package composes; it may use anything)
ALLOWED: dict[str, set[str]] = {
    "contracts": set(),
    "catalog": {"contracts"},
    "sql": set(),
    "sim": {"contracts"},
    "ingest": {"contracts", "catalog", "sql"},
    "daemon": {"contracts", "sim", "catalog"},
    "fit": {"contracts", "catalog", "sql", "sim", "ingest"},
    "campaign": {"contracts", "catalog", "sql", "sim", "fit", "daemon"},
}
# the one entry point into the root from a folder: `python -m twinlake.ingest`
ENTRY_POINTS = {"twinlake.ingest.__main__"}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the installed package layout."""
    out: dict[str, Path] = {}
    for folder in FOLDERS + (ROOT,):
        base = REPO / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            package = ROOT if folder == ROOT else f"{ROOT}.{folder}"
            out[".".join([package, *parts])] = path
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Absolute names of the twinlake modules `name` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == ROOT)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != ROOT:
                continue
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    return found


def graph_between_folders() -> dict[str, set[str]]:
    """folder -> the folders of ours its modules import (what docs/architecture.md draws)."""
    out: dict[str, set[str]] = {f: set() for f in FOLDERS + (ROOT,)}
    for src, targets in _graph().items():
        if src in ENTRY_POINTS:
            continue
        a = _folder(src)
        out[a].update(b for b in map(_folder, targets - {ROOT}) if b != a)
    return out


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else ROOT


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {n: {m for m in _imports(n, p) if m in mods} for n, p in mods.items()}


def test_every_arrow_between_folders_follows_the_layering() -> None:
    wrong = []
    for src, targets in _graph().items():
        a = _folder(src)
        if a == ROOT or src in ENTRY_POINTS:
            continue
        for dst in targets:
            b = _folder(dst)
            if dst == ROOT:  # the bare package: its version, nothing else
                continue
            if b != a and b not in ALLOWED[a]:
                wrong.append(f"{src} -> {dst} ({a} may import only {sorted(ALLOWED[a]) or 'nothing of ours'})")
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of `edges` (node -> the nodes it imports) meets."""
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return cycles


def test_no_import_circle_between_modules() -> None:
    graph = _graph()
    # a package's __init__ re-exporting its own modules is not a circle of the code's logic
    edges = {s: {d for d in t if not (s == d.rpartition(".")[0] or d == s)} for s, t in graph.items()}
    cycles = _cycles(edges)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_circle_between_bench_scripts() -> None:
    """bench/ scripts import each other by bare name (the script's folder is on sys.path); every
    import counts, the ones inside functions too."""
    bench = {p.stem: p for p in (REPO / "bench").glob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in bench.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
        edges[name] = (found & bench.keys()) - {name}
    cycles = _cycles(edges)
    assert not cycles, "import circles in bench/:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("folder", FOLDERS + (ROOT,))
def test_no_module_is_over_the_size_limit(folder: str) -> None:
    big = [f"{p.relative_to(REPO)}: {n} lines" for p in (REPO / folder).rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 450]
    assert not big, "modules over ~400 lines (limit 450):\n" + "\n".join(big)


def test_the_architecture_doc_draws_the_real_graph() -> None:
    """docs/architecture.md lists each folder's imports as the code has them."""
    doc = (REPO / "docs" / "architecture.md").read_text()
    for folder, uses in graph_between_folders().items():
        if folder == ROOT:
            continue
        line = f"- `{folder}` → " + (", ".join(f"`{u}`" for u in sorted(uses)) or "nothing of ours")
        assert line in doc, f"docs/architecture.md should say: {line}"


def test_the_resolver_sees_relative_imports(tmp_path) -> None:
    pkg = tmp_path / "fit"
    pkg.mkdir()
    (pkg / "a.py").write_text("from ..catalog import Lake\nfrom .b import x\nfrom . import c\n")
    found = _imports("twinlake.fit.a", pkg / "a.py")
    assert {"twinlake.catalog", "twinlake.catalog.Lake", "twinlake.fit.b", "twinlake.fit.c"} <= found


def test_the_root_uses_fit_only_through_its_public_face():
    """The commands import `twinlake.fit`'s names (fit/__init__.py), never its inner modules, so
    fit's sub-packages can be rearranged without touching a command."""
    inner = []
    for src, targets in _graph().items():
        if _folder(src) != ROOT:
            continue
        inner += [f"{src} -> {t}" for t in sorted(targets) if t.startswith(f"{ROOT}.fit.")]
    assert not inner, "import these from twinlake.fit instead:\n" + "\n".join(inner)


# fit/torque's sub-packages, lowest floor first: each may import only the floors below it
# (function-level imports count); the route and held_out.py at the top compose them.
TORQUE_FLOORS = ("inputs", "model", "estimation", "scores", "low_rate")


def _torque_floor(module: str) -> int | None:
    prefix = f"{ROOT}.fit.torque"
    if module != prefix and not module.startswith(prefix + "."):
        return None
    parts = module[len(prefix) + 1:].split(".") if module != prefix else []
    return TORQUE_FLOORS.index(parts[0]) if parts and parts[0] in TORQUE_FLOORS \
        else len(TORQUE_FLOORS)


def test_the_torque_route_imports_only_down_its_floors():
    wrong = []
    for src, targets in _graph().items():
        a = _torque_floor(src)
        if a is None:
            continue
        for dst in targets:
            b = _torque_floor(dst)
            if b is not None and b > a:
                wrong.append(f"{src} -> {dst}")
    assert not wrong, "fit/torque imports up its floors " + str(TORQUE_FLOORS) + ":\n" + "\n".join(wrong)


# the ingest spine flows one way: the plan (which inputs, in which order) and the per-input
# pipeline (read, validate, write, publish) know nothing of who runs them; the executors
# (execute.py serial, fanout.py on Ray) use both, and nothing below them calls back up
INGEST_SPINE = {"plan": 0, "pipeline": 0, "execute": 1, "fanout": 2}


def test_the_ingest_spine_flows_one_way():
    def floor(module: str) -> int | None:
        prefix = f"{ROOT}.ingest."
        return INGEST_SPINE.get(module[len(prefix):]) if module.startswith(prefix) else None

    wrong = []
    for src, targets in _graph().items():
        a = floor(src)
        for dst in targets if a is not None else ():
            b = floor(dst)
            if b is not None and dst != src and (b > a or b == a == 0):  # up, or plan <-> pipeline
                wrong.append(f"{src} -> {dst}")
    assert not wrong, "the ingest spine calls back up or across (plan, pipeline < execute < fanout):\n" + "\n".join(wrong)


def test_the_publish_primitive_computes_nothing():
    """catalog/publish.py moves a partition into place; what goes in it (a run's intervals
    included) is its writer's, so publish imports nothing that computes (ingest's write step
    calls `catalog.intervals.stage_run_intervals`)."""
    targets = _graph()[f"{ROOT}.catalog.publish"]
    assert not {t for t in targets if t.startswith(f"{ROOT}.catalog.intervals") or "stored_intervals" in t}, targets


# fit/'s floors, lowest first: each sub-package may import only the floors below it and its own
# (function-level imports count). The core (parameter space, intervals, objective, residuals, pool,
# noise floor, covariance, a parameter's status) carries the searches (the replay search and the
# torque route's sub-packages), which know nothing of how a fit is stored; the records store
# them; trust judges stored fits; reports show them. The drivers on top compose a whole fit and
# publish it: fit/run.py (the replay search) and the torque route's top modules (fit/torque/*.py).
FIT_FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("errors",)),
    ("core", ("core",)),
    ("searches", ("replay", "torque.inputs", "torque.model", "torque.estimation", "torque.scores",
                  "torque.low_rate")),
    ("records", ("records",)),
    ("trust", ("trust",)),
    ("reports", ("reports",)),
    ("drivers", ("run", "torque")),
)
FIT_SUBPACKAGES = {p.name for p in (REPO / "fit").iterdir() if p.is_dir() and (p / "__init__.py").exists()} \
    | {p.stem for p in (REPO / "fit").glob("*.py") if p.stem != "__init__"}


def _fit_place(module: str) -> tuple[int, str] | None:
    """(floor, unit) of a module inside fit/ (unit: the longest prefix of FIT_FLOORS it falls
    under, so sibling searches are told apart); None outside fit/ and for fit's public face."""
    prefix = f"{ROOT}.fit."
    if not module.startswith(prefix):
        return None
    rest = module[len(prefix):]
    best: tuple[int, str] | None = None
    for floor, (_, units) in enumerate(FIT_FLOORS):
        for unit in units:
            if (rest == unit or rest.startswith(unit + ".")) and (best is None or len(unit) > len(best[1])):
                best = (floor, unit)
    return best


def test_every_fit_module_has_a_floor():
    missing = sorted(m for m in _graph() if m.startswith(f"{ROOT}.fit.") and _fit_place(m) is None)
    assert not missing, "fit/ modules on no floor of FIT_FLOORS:\n" + "\n".join(missing)
    named = {u.split(".")[0] for _, units in FIT_FLOORS for u in units}
    assert FIT_SUBPACKAGES <= named, f"fit/ sub-packages on no floor: {sorted(FIT_SUBPACKAGES - named)}"


def test_fit_imports_only_down_its_floors():
    """An arrow back up (a search reading a record, a record judging itself, the trust tools
    drawing a report) or across (the replay search and the torque route importing each other)
    fails, wherever in a function the import sits."""
    names = [name for name, _ in FIT_FLOORS]
    wrong = []
    for src, targets in _graph().items():
        a = _fit_place(src)
        for dst in sorted(targets) if a is not None else ():
            b = _fit_place(dst)
            if b is None:
                continue
            same_search = a[0] == b[0] == names.index("searches") and \
                (a[1] == b[1] or {a[1].split(".")[0], b[1].split(".")[0]} == {"torque"})
            if b[0] > a[0] or (b[0] == a[0] and b[1] != a[1] and not same_search):
                wrong.append(f"{src} ({names[a[0]]}) -> {dst} ({names[b[0]]})")
    assert not wrong, "fit/ imports up or across its floors " + " < ".join(names) + ":\n" + "\n".join(wrong)


def test_the_fit_floor_check_sees_an_arrow_up():
    assert _fit_place(f"{ROOT}.fit.replay.gates")[0] < _fit_place(f"{ROOT}.fit.trust.adequacy")[0]
    assert _fit_place(f"{ROOT}.fit.torque.route")[0] > _fit_place(f"{ROOT}.fit.records.record")[0]
    assert _fit_place(f"{ROOT}.fit.torque.model.regressor")[0] < _fit_place(f"{ROOT}.fit.records.record")[0]
