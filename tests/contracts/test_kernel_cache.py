"""A cached kernel recompiles when a constant it inlines from another module changes.

numba stamps a cached kernel with its own file only: a package whose kernel reads a constant
from a sibling module (as sim/kernels/tick.py reads sim/fr3.py's limits) loads stale machine
code after that constant is edited. The project's locator (contracts/kernel_cache.py) stamps
its kernels with the digest of every source they import. Each run is a fresh interpreter, as a
user's next command is; numba's own locator is run as the control."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from twinlake.contracts.kernel_cache import source_closure

KERNEL = "from numba import njit\n\nfrom .consts import GAIN\n\n\n@njit(cache=True)\ndef gain():\n    return GAIN\n"
RUN = ("import sys; sys.path.insert(0, {root!r})\n"
       "import twinlake.contracts.kernel_cache as kc\n"
       "if {ours}:\n    kc.PACKAGES = ('kpkg',); kc.register()\n"
       "from kpkg.kern import gain\n"
       "print(gain(), sum(gain.stats.cache_hits.values()))\n")


def _package(root: Path, gain: float) -> None:
    pkg = root / "kpkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kern.py").write_text(KERNEL)
    (pkg / "consts.py").write_text(f"GAIN = {gain!r}\n")


def _gain(root: Path, ours: bool) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run([sys.executable, "-c", RUN.format(root=str(root), ours=ours)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def test_editing_an_inlined_constant_recompiles_the_cached_kernel(tmp_path):
    control, ours = tmp_path / "control", tmp_path / "ours"
    for root in (control, ours):
        root.mkdir()
        _package(root, 1.5)
        assert _gain(root, root is ours) == (1.5, 0)  # compiled and cached
    assert _gain(ours, True) == (1.5, 1)  # loaded from the cache: the stamp is stable
    for root in (control, ours):
        _package(root, 2.5)  # the sibling's constant edited, the kernel's file untouched
    assert _gain(control, False) == (1.5, 1)  # numba's own stamp: the stale kernel
    assert _gain(ours, True) == (2.5, 0)  # the sources' digest: compiled afresh


def test_the_kernels_digest_covers_the_constants_they_inline():
    import twinlake.sim.kernels.tick as tick
    import twinlake.sim.kernels._callback_body as body

    sim = Path(tick.__file__).resolve().parents[1]
    assert sim / "fr3.py" in source_closure(Path(tick.__file__).resolve())
    assert {sim / "fr3.py", sim / "kernels" / "tick.py", sim / "kernels" / "replay_context.py"} <= set(
        source_closure(Path(body.__file__).resolve()))
