"""The quick fit's gap report: one joint's first-order fit (fit/trust/quick.py) of a lake run
against the first-order numbers of a profile (the sim's own), as markdown
(`twinlake fit quick RUN --joint J`). It never changes the profile."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataError, SettingError
from .quick import (MAX_CONDITION_NUMBER, WINDOW_FRAMES, FirstOrderModel, JointSamples, QuickFitResult,
                    fit_first_order, output_error_rms)


@dataclass(frozen=True)
class GapReport:
    """Inputs of the markdown gap report: the fit against the profile in use, for one joint."""

    run_label: str
    joint: int
    result: QuickFitResult
    sim_model: FirstOrderModel
    profile_label: str
    fit_output_error_rad_s: float
    sim_output_error_rad_s: float
    notes: tuple[str, ...] = ()

    def markdown(self) -> str:
        """The report text (deterministic for the same inputs)."""
        r, s = self.result, self.sim_model
        verdict = "trustworthy (no warnings)" if r.trustworthy else "NOT TRUSTWORTHY: read the warnings"
        rows = [
            ("effective inertia I", "kg·m²", r.model.inertia_kgm2, r.stderr.inertia_kgm2, s.inertia_kgm2),
            ("viscous damping b", "N·m·s/rad", r.model.viscous_nms_per_rad, r.stderr.viscous_nms_per_rad,
             s.viscous_nms_per_rad),
        ]
        if r.with_friction:
            rows.append(("Coulomb friction f_c", "N·m", r.model.coulomb_nm, r.stderr.coulomb_nm, s.coulomb_nm))
        lines = [
            f"# Quick-fit gap report: {self.run_label}, joint J{self.joint}",
            "",
            f"First-order model `I·d(dq)/dt = tau_cmd − b·dq − f_c·sign(dq)` fitted by least squares over "
            f"{r.num_windows} windows of {WINDOW_FRAMES} frames ({r.window_start_s:.3f} s to {r.window_end_s:.3f} s). "
            f"Compared with the profile in use: {self.profile_label}.",
            "",
            f"**Verdict: {verdict}.**",
            "",
            "| quantity | unit | fit | standard error | sim (profile) | sim − fit | (sim − fit)/fit |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for name, unit, val, err, sim in rows:
            rel = f"{100 * (sim - val) / val:+.1f} %" if val != 0 else "n/a"
            lines.append(f"| {name} | {unit} | {val:.4g} | {err:.2g} | {sim:.4g} | {sim - val:+.4g} | {rel} |")
        lines += [
            f"| time constant I/b | s | {r.model.time_constant_s:.4g} | | {s.time_constant_s:.4g} | | |",
            "",
            "| diagnostic | value |",
            "|---|---:|",
            f"| standard errors | sandwich (Newey–West, {r.bandwidth_windows} window bandwidth): "
            f"correlated windows |",
            f"| condition number (column-scaled) | {r.condition_number:.1f} (warn above {MAX_CONDITION_NUMBER:g}) |",
            f"| R² of the window equation | {r.r_squared:.4f} |",
            f"| window residual RMS | {r.residual_rms_rad_s:.3g} rad/s |",
            f"| output error RMS, fitted model | {self.fit_output_error_rad_s:.3g} rad/s |",
            f"| output error RMS, sim model | {self.sim_output_error_rad_s:.3g} rad/s |",
            f"| windows used / at rest / gap or split / non-finite | {r.num_windows} / {r.windows.skipped_rest} / "
            f"{r.windows.skipped_gap} / {r.windows.skipped_nonfinite} |",
            "",
            "## Warnings",
            "",
        ]
        lines += [f"- {w}" for w in r.warnings] or ["- none"]
        lines += [
            "",
            "## Notes",
            "",
            "- This report never changes the profile. What to change is your decision.",
            "- The sim's I is the MuJoCo mass-matrix diagonal for this joint, averaged over the windows' "
            "configurations, plus the profile's armature; its f_c is mu_static × dynamic_ratio, its b mu_viscous.",
            "- A clean diagnostic does not prove a first-order model represents the joint (coupling to the other "
            "joints is ignored) or that it predicts another run: validate on a held-out run.",
        ]
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def sim_joint_model(params, joint: int, q_samples: np.ndarray, model_path: str | None = None) -> FirstOrderModel:
    """The profile's first-order numbers for ``joint`` (1-based): I = MuJoCo mass-matrix diagonal
    (links + the profile's armature) averaged over ``q_samples`` (K, 7) [rad]; b = mu_viscous;
    f_c = mu_static · dynamic_ratio."""
    import mujoco

    from ...sim import load_model
    from ...sim.arm_model.model import arm_index

    model = load_model(model_path)
    arm = arm_index(model)
    model.dof_armature[arm.dof_adr] = params.armature
    data = mujoco.MjData(model)
    full = np.zeros((model.nv, model.nv))
    diag = []
    for q in np.atleast_2d(q_samples):
        data.qpos[arm.qpos_adr] = q
        mujoco.mj_fwdPosition(model, data)
        if hasattr(data, "qM"):  # MuJoCo 3: mj_fullM(m, dst, qM)
            mujoco.mj_fullM(model, full, data.qM)
        else:  # MuJoCo 4: mj_fullM(m, d, dst)
            mujoco.mj_fullM(model, data, full)
        diag.append(full[arm.dof_adr[joint - 1], arm.dof_adr[joint - 1]])
    j = joint - 1
    return FirstOrderModel(float(np.mean(diag)), float(params.mu_viscous[j]),
                           float(params.mu_static[j] * params.dynamic_ratio[j]))


def quick_fit_run(lake, run: str, joint: int, *, profile=None, profile_label: str = "nominal (Menagerie)",
                  with_friction: bool = True, delay_ms: int = 0, strict: bool = True,
                  min_duration_s: float = 0.5) -> GapReport:
    """Quick-fit one joint of a run's clean intervals (selector ``[ROBOT/]RUN``) and compare it
    with ``profile`` (a DynamicsParams; default nominal). Raises QuickFitRefused or ValueError."""
    from ..core.intervals import read_frames, resolve
    from ...sim import DynamicsParams

    if not 1 <= joint <= 7:
        raise SettingError("joint", str(joint), "expected a joint number 1..7")
    refs = resolve(lake, [run], min_duration_s=min_duration_s)
    tables = read_frames(lake, refs)
    need = ["t_s", f"dq{joint}", f"tau_cmd{joint}"] + [f"q{k}" for k in range(1, 8)]
    cols: dict[str, list[np.ndarray]] = {n: [] for n in need}
    segment = []
    for i, (ref, table) in enumerate(zip(refs, tables)):
        for n in need:
            if n not in table.column_names:
                raise DataError(f"run {ref.robot}/{ref.run}: frames have no column {n!r}")
            arr = table.column(n).to_numpy(zero_copy_only=False).astype(np.float64)
            if n != "t_s" and np.all(np.isnan(arr)):
                raise DataError(f"run {ref.robot}/{ref.run}: column {n!r} was not recorded (all null)")
            cols[n].append(arr)
        segment.append(np.full(table.num_rows, i))
    c = {n: np.concatenate(v) for n, v in cols.items()}
    samples = JointSamples(c["t_s"], c[f"tau_cmd{joint}"], c[f"dq{joint}"], np.concatenate(segment), int(delay_ms))
    result = fit_first_order(samples, with_friction=with_friction, strict=strict)
    params = profile if profile is not None else DynamicsParams.nominal()
    picks = result.windows.start[np.linspace(0, result.num_windows - 1, min(50, result.num_windows)).astype(int)]
    q = np.column_stack([c[f"q{k}"] for k in range(1, 8)])[picks]
    sim = sim_joint_model(params, joint, q)
    label = f"{refs[0].robot}/{refs[0].run} ({len(refs)} clean interval(s))"
    notes = (f"torque delay assumed: {int(delay_ms)} ms",) if delay_ms else ()
    return GapReport(label, joint, result, sim, profile_label, output_error_rms(result.model, samples, result.windows),
                     output_error_rms(sim, samples, result.windows), notes)
