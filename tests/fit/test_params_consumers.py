"""Every user of the parameter vector agrees with `twinlake.sim.LAYOUT`, and none re-declares it.

The population engine's slicing is checked against the reference engine (which reads the
named DynamicsParams fields) in tests/sim/test_replay.py; here: the fit's parameter space,
identifiability, refinement, the FrankaTwin importer and exporter, and a scan of the source.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from twinlake.fit.trust.identifiability import DISCRETE_NAMES, analyse
from twinlake.fit.core.space import ParameterSpace, parse_space, select
from twinlake.fit.records.frankatwin_import import ResultFileError, decoded_values
from twinlake.sim import LAYOUT, DynamicsParams, to_frankatwin_decoded

ROOT = Path(__file__).resolve().parents[2]
OWNERS = {ROOT / "sim" / "arm_model" / "params.py", ROOT / "sim" / "arm_model" / "layout.py"}
SOURCES = sorted(p for folder in ("sim", "fit", "ingest", "catalog", "daemon", "twinlake")
                 for p in (ROOT / folder).rglob("*.py") if p not in OWNERS) + [ROOT / "bench" / "recovery.py"]
# names that, declared at module level anywhere but sim/arm_model/params.py, re-declare the layout
LAYOUT_CONSTANTS = {"PARAM_COUNT", "PARAM_NAMES", "DEFAULT_BOUNDS", "DELAY_INDEX", "DELAY_NAME", "GROUPS",
                    "_GROUPS", "DECODED_GROUPS"}


def _distinct() -> DynamicsParams:
    return DynamicsParams(armature=np.linspace(0.1, 0.4, 7), mu_static=np.linspace(0.5, 1.7, 7),
                          dynamic_ratio=np.linspace(0.3, 0.9, 7), mu_viscous=np.linspace(0.2, 3.0, 7),
                          motor_delay_ms=3)


def test_parameter_space_is_the_layout():
    space = ParameterSpace()
    assert np.array_equal(space.bounds, LAYOUT.bounds)
    # everything but the delay and the groups frozen by default (FrankaTwin's 29 stay the fit)
    assert sorted([*space.free_indices.tolist(), LAYOUT.index("motor_delay_ms"), *LAYOUT.default_frozen]) == \
        list(range(LAYOUT.size))
    assert set(LAYOUT.integer_indices) - {LAYOUT.index("motor_delay_ms")} <= set(LAYOUT.default_frozen)  # offsets
    assert space.frozen == LAYOUT.default_frozen and len(space.free_indices) + 1 == len(LAYOUT.frankatwin_indices)
    for g in LAYOUT.groups:
        assert select(g.name) == LAYOUT.select(g.name) == list(range(LAYOUT.size))[LAYOUT.slice(g.name)]
    full = space.decode(np.full((2, len(space.free_indices)), 0.5), np.array([1, 4]))
    assert full.shape == (2, LAYOUT.size)
    assert LAYOUT.take(full, "motor_delay_ms").tolist() == [1.0, 4.0]
    assert space.delay_of(full[1]) == 4
    assert list(space.to_json()["bounds"]) == list(LAYOUT.names)
    frozen = parse_space(["dynamic_ratio=0.6"])
    assert frozen.free_names == [n for g in LAYOUT.groups if g.name != "dynamic_ratio" and not g.frozen_by_default
                                 for n in g.names]
    assert np.all(LAYOUT.take(frozen.decode(np.zeros((1, 21)), np.array([2])), "dynamic_ratio") == 0.6)


def test_the_delay_check_takes_its_range_from_the_layout():
    hi = LAYOUT.group("motor_delay_ms").bounds[1]
    assert parse_space([f"delay={hi:g}"]).delay_choices.tolist() == [int(hi)]
    with pytest.raises(ValueError, match=rf"motor_delay_ms: expected a whole number of ms in 0..{hi:g}, got {hi + 1}"):
        parse_space([f"delay={hi + 1:g}"])


def test_identifiability_marks_exactly_the_layouts_integer_parameters_discrete():
    assert DISCRETE_NAMES == {LAYOUT.names[i] for i in LAYOUT.integer_indices}
    free = [i for i in range(LAYOUT.size) if i not in LAYOUT.integer_indices]
    rng = np.random.default_rng(0)
    res = analyse(LAYOUT.names, LAYOUT.nominal, rng.normal(size=(200, len(free))), rng.normal(size=200), free,
                  LAYOUT.bounds[:, 0], LAYOUT.bounds[:, 1])
    assert res.flagged("discrete") == ["motor_delay_ms", *LAYOUT.group("motor_delay_offset_ms").names]


def test_frankatwin_import_and_export_use_the_layouts_names_and_order(tmp_path):
    p = _distinct()
    row = decoded_values(tmp_path / "sysid_best_params.json", to_frankatwin_decoded(p))
    assert list(row) == list(LAYOUT.names)
    assert np.array_equal(np.array(list(row.values())), p.to_vector())
    given_mu_dynamic = {k: v for k, v in to_frankatwin_decoded(p).items() if k != "dynamic_ratio"}
    np.testing.assert_allclose(list(decoded_values(tmp_path / "x.json", given_mu_dynamic).values()),
                               p.to_vector(), rtol=1e-15)
    bad = {**to_frankatwin_decoded(p), "mu_viscous": [1.0] * 6}
    with pytest.raises(ResultFileError, match="best_params_decoded.mu_viscous"):
        decoded_values(tmp_path / "x.json", bad)
    bad = {**to_frankatwin_decoded(p), "motor_delay_steps": "2"}
    with pytest.raises(ResultFileError, match="best_params_decoded.motor_delay_steps"):
        decoded_values(tmp_path / "x.json", bad)


def _findings(path: Path) -> list[str]:
    """What in `path` re-declares the layout: a layout constant, a literal listing every
    per-joint group, the vector's length as a number, or `[:, a:b]` / `[:, k]` on a group's span."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    joint = {g.name for g in LAYOUT.joint_groups if g.frankatwin_key}  # FrankaTwin's per-joint groups
    spans = {(LAYOUT.slice(g.name).start, LAYOUT.slice(g.name).stop) for g in LAYOUT.joint_groups}
    singles = {LAYOUT.index(g.name) for g in LAYOUT.scalar_groups}
    found = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        found += [f"declares {n.id}" for t in targets for n in ast.walk(t)
                  if isinstance(n, ast.Name) and n.id in LAYOUT_CONSTANTS]
    for node in ast.walk(tree):
        # FrankaTwin's vector length anywhere; the whole vector's length in a shape tuple (it is
        # also a common number, 50 Hz among them, elsewhere)
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value == len(LAYOUT.frankatwin_indices):
            found.append(f"line {node.lineno}: the number {node.value}")
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Constant) and type(e.value) is int
                                               and e.value == LAYOUT.size for e in node.elts):
            found.append(f"line {node.lineno}: a shape with the number {LAYOUT.size}")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            strings = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if joint <= strings:
                found.append(f"line {node.lineno}: a literal listing the groups")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
            rows, cols = node.slice.elts
            if not (isinstance(rows, ast.Slice) and rows.lower is None and rows.upper is None):
                continue
            span = (cols.lower.value, cols.upper.value) if (
                isinstance(cols, ast.Slice) and isinstance(cols.lower, ast.Constant)
                and isinstance(cols.upper, ast.Constant)) else None
            if span in spans or (isinstance(cols, ast.Constant) and cols.value in singles):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_but_sim_params_declares_the_layout():
    assert len(SOURCES) > 50  # the scan sees the package
    found = {str(p.relative_to(ROOT)): f for p in SOURCES if (f := _findings(p))}
    assert found == {}, f"ask twinlake.sim.LAYOUT instead: {found}"


def test_the_scan_finds_the_old_raw_slices(tmp_path):
    old = tmp_path / "old.py"
    old.write_text('PARAM_COUNT = 29\nGROUPS = ("armature", "mu_static", "dynamic_ratio", "mu_viscous")\n'
                   "def f(m):\n    return m[:, 7:14], m[:, 28]\n")
    assert len(_findings(old)) == 6
