"""Error bars and the quick fit: the one-batch finite-difference Jacobian against one candidate at a time; the vectorised quick fit against a per-window loop."""
import sys
import time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fit"))  # the tests' seeded problems
from test_identifiability import _problem, TRUTH
from test_quick_fit import _open_loop
from twinlake.fit.trust.identifiability import fd_jacobian
from twinlake.fit.trust.quick import fit_first_order, WINDOW_FRAMES
from twinlake.sim import PARAM_NAMES, DEFAULT_BOUNDS

free = [f"{g}_j{j}" for g in ("armature", "mu_viscous") for j in range(1, 5)]
idx = [PARAM_NAMES.index(n) for n in free]
prob = _problem(0, n_ticks=1000)
x = TRUTH.to_vector()
# warm: the engine builds its batches per population size (17 for the batch, 1 one at a time);
# the FD Jacobian reuses them, so both are built before timing
prob.residuals(np.tile(x, (2 * len(idx) + 1, 1)))
t0 = time.perf_counter(); J1, _ = fd_jacobian(prob.residuals, x, idx, DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1]); t_batch = time.perf_counter() - t0
seq_prob = _problem(0, n_ticks=1000)
seq_prob.residuals(x[None])
seq = lambda P: np.vstack([seq_prob.residuals(p[None]) for p in P])
t0 = time.perf_counter(); J2, _ = fd_jacobian(seq, x, idx, DEFAULT_BOUNDS[:, 0], DEFAULT_BOUNDS[:, 1]); t_seq = time.perf_counter() - t0
assert np.allclose(J1, J2)
print(f"FD Jacobian, k={len(idx)} (17 candidates x 1000 ticks): one batch {t_batch:.3f} s, one candidate at a time {t_seq:.3f} s, ratio {t_seq / t_batch:.2f}x")

s = _open_loop(1, seconds=60.0, noise=0.002)
t0 = time.perf_counter(); fit = fit_first_order(s); t_vec = time.perf_counter() - t0
def loop_fit(s):
    t, u, v = s.t_s, s.torque_nm, s.velocity_rad_s
    speed99 = np.percentile(np.abs(v), 99); rows = []; ys = []
    for k0 in range(0, len(t) - WINDOW_FRAMES + 1, WINDOW_FRAMES):
        w = slice(k0, k0 + WINDOW_FRAMES)
        if np.max(np.abs(v[w])) <= 0.02 * speed99 or np.max(np.diff(t[w])) > 0.1: continue
        dt = np.diff(t[w]); a = slice(k0, k0 + WINDOW_FRAMES - 1)
        rows.append([np.sum(u[a] * dt), -np.sum(v[a] * dt), -np.sum(np.sign(v[a]) * dt)]); ys.append(v[k0 + WINDOW_FRAMES - 1] - v[k0])
    return np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
t0 = time.perf_counter(); th = loop_fit(s); t_loop = time.perf_counter() - t0
assert abs(1 / th[0] - fit.model.inertia_kgm2) < 1e-9
print(f"quick fit, 60 s at 1 kHz ({fit.num_windows} windows): vectorised {t_vec * 1e3:.1f} ms, per-window Python loop {t_loop * 1e3:.1f} ms, ratio {t_loop / t_vec:.1f}x")
