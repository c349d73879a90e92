"""The explicit format registry: `FORMAT_MODULES` is the list of format modules, in detection
order, and every module that registers a reader is on it."""

from __future__ import annotations

import ast
from pathlib import Path

import twinlake.ingest as ingest
from twinlake.ingest import FORMAT_MODULES, readers

INGEST = Path(ingest.__file__).parent


def _registers_a_reader(path: Path) -> bool:
    """Whether the module calls `register(...)` at import time (at module level or in a
    module-level loop)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        for sub in ast.walk(node) if isinstance(node, (ast.Expr, ast.For)) else ():
            if isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "register":
                return True
    return False


def test_every_module_that_registers_a_reader_is_listed():
    registering = {"twinlake.ingest." + ".".join(p.relative_to(INGEST).with_suffix("").parts)
                   for p in INGEST.rglob("*.py") if _registers_a_reader(p)}
    assert registering == set(FORMAT_MODULES)
    assert len(set(FORMAT_MODULES)) == len(FORMAT_MODULES)


def test_readers_are_tried_in_the_listed_order():
    names = [r.name for r in readers()]
    assert names == ["fr3_stack_csv", "frankatwin_log50", "frankatwin_ring_1khz", "frankatwin_target_csv",
                     "frankatwin_sim_csv", "frankatwin_sidecar", "frankatwin_result",
                     "fr3_joint_excitation", "tr_episode", "mapped_log", "ros_bag"]


def test_the_order_does_not_depend_on_what_was_imported_first():
    import subprocess
    import sys

    code = ("import twinlake.ingest.episodes.episode, twinlake.ingest.frankatwin.results; "
            "from twinlake.ingest import readers; print(','.join(r.name for r in readers()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().split(",") == [r.name for r in readers()]


def test_detection_imports_the_format_modules_only_as_far_as_it_needs(tmp_path):
    """A CSV v2 is found by the first listed module: detecting it (and looking its reader up by
    name, as an ingest does) imports none of the later ones, such as the bag reader's rosbags;
    a file no reader matches is tried against every one, in the listed order."""
    import subprocess
    import sys

    from twinlake.ingest.samples import SampleSpec, write_sample

    csv = write_sample(tmp_path / "run.csv", SampleSpec(rows=50))
    junk = tmp_path / "notes.xyz"
    junk.write_text("nothing a reader knows\n")
    code = ("import sys; from pathlib import Path; from twinlake.ingest.registry import detect, reader_named; "
            "found, tried = detect(Path(sys.argv[1])); reader_named(found.name); "
            "print(found.name, 'twinlake.ingest.bags.reader' in sys.modules, 'rosbags' in sys.modules, "
            "'twinlake.ingest.frankatwin.readers' in sys.modules); "
            "none, tried = detect(Path(sys.argv[2])); print(none, ','.join(n for n, _ in tried))")
    out = subprocess.run([sys.executable, "-c", code, str(csv), str(junk)], capture_output=True, text=True, check=True)
    first, second = out.stdout.strip().splitlines()
    assert first == "fr3_stack_csv False False False"
    assert second == "None " + ",".join(r.name for r in readers())
