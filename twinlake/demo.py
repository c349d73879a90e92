"""`twinlake demo`: the main job end to end on the bundled demo robot.

1. plan multisine excitations of all 7 joints (daemon's planner): two training runs and one
   held-out run with different tones and phases;
2. record them with the offline recorder on the demo robot (`sim/profiles/demo_robot.json`,
   the truth the fit never sees), with measurement noise; the robot carries a tool at its
   flange (`--tool-kg`, default 0.6 kg) that its firmware was not told about (no configured
   load), as a camera bolted on a real arm;
3. ingest the CSV v2 recordings into the lake;
4. select the clean intervals and fit FrankaTwin's 29 parameters briefly: the fit's model
   adequacy line says its residual is many times the noise floor and names the flange mass
   (`try freeing the payload (parameter spec +payload)`);
5. fit again with `--params +payload` on a local Ray (CMA-ES + categorical delay, then a
   Levenberg–Marquardt polish);
6. print each fit's verdict (fit/trust/verdict.py; stored like any fit's), truth against fit per
   joint with the 95 % intervals of the estimated parameters (whether each truth value lies
   inside; the parameters left out counted and named with their status), the tool's mass found,
   and the held-out joint
   RMSE of both fits beside the noise floor (the replay of the truth itself) and the nominal
   (untuned) model;
7. run a short campaign (`--campaign-episodes`, default 200) of the held-out run's targets on
   arms drawn from the final fit's posterior, with fr3_stack's default guards, and print its
   outcome table and each episode that did not complete (guard, joint, value, drawn parameters).

Everything printed is measured in that run (twinlake/demo_report.py); no figure from elsewhere.

The excitations are ones a real FR3 run with fr3_stack's client completes: multisines inside
its default preflight bounds (0.1 rad/s, 0.3 rad/s², 2 rad/s³; `gentle_multisine_run`), recorded
with its streaming guards enforced (tracking 0.05 rad from the anchor, speed 0.1 rad/s, state
age 0.2 s); each run's metadata.json states the bounds.

Recordings are deterministic (seeded), so re-running the demo on the same lake reuses them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .demo_report import closing_campaign, coverage_cause, truth_table
from .options import _lake_option, fail

if TYPE_CHECKING:
    from .synthetic import SyntheticRecording, SyntheticRun

ROBOT = "demo-robot"


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo (defaults: under 5 minutes on 2 cores)."""

    seconds: float = 4.0  # excitation per run [s] (plus holds and a tail)
    population: int = 16
    generations: int = 12
    refine_iterations: int = 16  # full-data LM cap (bench/RESULTS.md has the iterations it took)
    workers: int = 2
    seed: int = 0
    train_tones: tuple[float, ...] = (0.2, 0.45, 0.8)
    holdout_tones: tuple[float, ...] = (0.25, 0.5, 0.9)
    tool_kg: float = 0.6  # the flange payload the firmware does not know [kg]; 0: none, no first fit
    tool_com_m: tuple[float, float, float] = (0.0, 0.0, 0.05)  # its centre of mass, flange frame [m]
    screen_generations: int = 3  # generations of the first fit (FrankaTwin's 29, no refinement)
    campaign_episodes: int = 200  # episodes of the closing campaign (0: none)

    @property
    def tool(self):
        """The tool as a twinlake.sim EndLoad, None without one."""
        from .sim.arm_model.load import EndLoad

        return EndLoad(self.tool_kg, self.tool_com_m) if self.tool_kg > 0 else None

    def runs(self) -> list[tuple[str, SyntheticRun]]:
        """(role, synthetic run) of the three recordings: phases and noise seeded 1, 2, 3; each
        inside fr3_stack's default bounds (`gentle_multisine_run`: the amplitude is the largest
        whose reference peaks stay under 60 % of each bound)."""
        from .synthetic import gentle_multisine_run

        shape = dict(seconds=self.seconds, ramp_s=0.375 * self.seconds, hold_s=0.3, tail_s=0.3)
        return [("train", gentle_multisine_run("demo-train-1", self.train_tones, 1, **shape)),
                ("train", gentle_multisine_run("demo-train-2", self.train_tones, 2, **shape)),
                ("holdout", gentle_multisine_run("demo-holdout", self.holdout_tones, 3, **shape))]


def record_runs(cfg: DemoConfig, out: Path, console: Console) -> list[tuple[str, SyntheticRecording]]:
    """Write reference.csv, metadata.json and the offline recording of each demo run under
    `out`, with fr3_stack's guards enforced (`--enforce-guards`); ValueError if a recording
    would have been aborted (the demo's runs are ones a real FR3 run completes)."""
    from .daemon.guards import report_lines
    from .sim import DEMO_PROFILE_PATH
    from .synthetic import guard_report, record

    made = []
    for role, spec in cfg.runs():
        rec = record(spec, out, robot_id=ROBOT, truth_path=DEMO_PROFILE_PATH, payload=cfg.tool, enforce_guards=True)
        report = guard_report(rec)
        if rec.reused:
            console.print(f"  reusing {rec.csv}")
        else:
            plan = spec.plan
            console.print(f"  recorded {spec.run} ({role}): {plan.amplitude_deg:g}° multisine {list(plan.tones)} Hz, "
                          f"{rec.result.rows} ticks, {rec.result.speedup:.0f}× real time")
        if report is None or report["would_abort"] is not None:
            raise ValueError(f"{rec.csv}: " + ("no guard report" if report is None else report["verdict"]))
        console.print("  " + "\n  ".join(report_lines(report)))
        made.append((role, rec))
    return made


def ingest_runs(lake: Path, made: list[tuple[str, SyntheticRecording]], console: Console) -> None:
    """Ingest each recording as run `<run>` of robot `demo-robot`."""
    from .synthetic import ingest

    for _role, rec in made:
        for outcome in ingest(lake, [rec], ROBOT):
            console.print(f"  {rec.spec.run}: {outcome.status} ({outcome.frame_count or '-'} frames, verdict {outcome.verdict})")


def holdout_rmse(lake: Path, holdout: list[str], candidates: dict) -> dict[str, np.ndarray]:
    """Per-joint held-out q RMSE [rad] (7,) of each named parameter set, over all samples."""
    from .fit import FitProblem

    problem = FitProblem.from_lake(lake, holdout)
    names = list(candidates)
    params = np.stack([candidates[n].to_vector() for n in names])
    sq = np.zeros((len(names), 7))
    count = 0
    for inp, (q, _dq) in zip(problem.data.inputs, problem.rollout(params)):
        sq += ((q - inp.q_ref[None]) ** 2).sum(axis=1)
        count += q.shape[1]
    return {n: np.sqrt(sq[i] / count) for i, n in enumerate(names)}


def rmse_table(rmse: dict[str, np.ndarray], console: Console) -> None:
    table = Table(title=escape("held-out run: joint position RMSE [mrad]"))
    table.add_column("parameters")
    for j in range(7):
        table.add_column(f"J{j + 1}", justify="right")
    table.add_column("all", justify="right")
    for name, values in rmse.items():
        table.add_row(escape(name), *(f"{1e3 * v:.3f}" for v in values), f"{1e3 * np.sqrt(np.mean(values ** 2)):.3f}")
    console.print(table)


def _new_fit_id(lake: Path, stem: str) -> str:
    from .catalog import Lake

    fit_id, suffix = stem, 1
    while Lake(lake).fit_dir(fit_id).exists():
        suffix += 1
        fit_id = f"{stem}-{suffix}"
    return fit_id


def screen_fit(lake: Path, train: list[str], holdout: list[str], cfg: DemoConfig, stem: str, *,
               address: str | None, progress: bool, console: Console) -> tuple[str, list[str]]:
    """A short fit of FrankaTwin's 29 (no payload): its id and model-adequacy lines, printed."""
    from .fit import FitSettings, run_fit
    from .fit import adequacy_lines
    from .fit import parse_space

    settings = FitSettings(train=train, holdout=holdout, space=parse_space([]).to_json(),
                           population=cfg.population, generations=cfg.screen_generations, seed=cfg.seed,
                           refine_iterations=0)
    rec = run_fit(lake, settings, fit_id=_new_fit_id(lake, stem), workers=cfg.workers, address=address,
                  progress=progress)
    print_verdict(lake, rec, console)
    lines = [text for text, _passed in adequacy_lines(rec)[:2]]  # training, held-out
    for text in lines:
        console.print(f"  {text}")
    return rec.fit_id, lines


def print_verdict(lake: Path, rec, console: Console):
    """Decide the fit's verdict, store it (verdicts/fit=<id>/) and print it; returns it."""
    from .fit import record_verdict

    verdict = record_verdict(lake, rec, "demo")
    console.print(f"  {verdict.line()}", highlight=False, markup=False)
    return verdict


def run_demo(lake: Path, out: Path, cfg: DemoConfig = DemoConfig(), *, address: str | None = None,
             console: Console | None = None, progress: bool = True) -> dict:
    """The whole demo; returns a JSON-able summary (fit id, parameters, RMSEs)."""
    from .fit import load_fit
    from .fit import fit_statuses
    from .fit import FitSettings, run_fit
    from .fit import parse_space
    from .sim import DEMO_PROFILE_PATH, DynamicsParams, load_params

    console = console or Console(stderr=True, width=110)
    lake, out = Path(lake).absolute(), Path(out).absolute()
    tool = cfg.tool
    steps = (5 if tool is not None else 4) + (1 if cfg.campaign_episodes > 0 else 0)
    console.rule(f"1/{steps} record (offline recorder, demo robot"
                 + (f" with a {cfg.tool_kg:g} kg tool its firmware does not know)" if tool else ")"))
    made = record_runs(cfg, out, console)
    console.rule(f"2/{steps} ingest into {lake}")
    ingest_runs(lake, made, console)
    train = [f"{ROBOT}/{rec.spec.run}" for role, rec in made if role == "train"]
    holdout = [f"{ROBOT}/{rec.spec.run}" for role, rec in made if role == "holdout"]
    stem = "demo-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    screen_id, screen_lines = None, []
    if tool is not None:
        console.rule(f"3/{steps} FrankaTwin's 29 parameters ({cfg.screen_generations} generations): model adequacy")
        screen_id, screen_lines = screen_fit(lake, train, holdout, cfg, f"{stem}-29", address=address,
                                             progress=progress, console=console)
    specs = ["+payload"] if tool is not None else []
    console.rule(f"{steps - 1 - (cfg.campaign_episodes > 0)}/{steps} fit on Ray{' with --params +payload' if specs else ''}: population "
                 f"{cfg.population}, {cfg.generations} generations, {cfg.workers} workers")
    settings = FitSettings(train=train, holdout=holdout, space=parse_space(specs).to_json(),
                           population=cfg.population, generations=cfg.generations, seed=cfg.seed,
                           refine_iterations=cfg.refine_iterations)
    fit_id = _new_fit_id(lake, stem)
    rec = run_fit(lake, settings, fit_id=fit_id, workers=cfg.workers, address=address, progress=progress)
    verdict = print_verdict(lake, rec, console)
    console.rule(f"{steps - (cfg.campaign_episodes > 0)}/{steps} truth vs fit")
    truth = load_params(DEMO_PROFILE_PATH)
    truth = truth.with_payload(tool) if tool is not None else truth
    statuses = fit_statuses(rec)
    cover, left_out = truth_table(truth, rec.params, console, statuses)
    coverage_cause(cover, rec.extra.get("local_gates") or "", console)
    candidates = {"fit": rec.params}
    if tool is not None:
        found = rec.params.payload_mass
        console.print(f"tool: truth {cfg.tool_kg:.3f} kg, fit {found:.3f} kg "
                      f"({100 * (found - cfg.tool_kg) / cfg.tool_kg:+.1f} %); centre of mass truth "
                      f"{tuple(cfg.tool_com_m)} m, fit ({rec.params.payload_com_x:.3f}, "
                      f"{rec.params.payload_com_y:.3f}, {rec.params.payload_com_z:.3f}) m")
        candidates["FrankaTwin's 29 (no tool)"] = load_fit(lake, screen_id).params
    candidates |= {"truth (noise floor)": truth, "nominal (Menagerie)": DynamicsParams.nominal()}
    rmse = holdout_rmse(lake, holdout, candidates)
    rmse_table(rmse, console)
    fit_all = float(np.sqrt(np.mean(rmse["fit"] ** 2)))
    floor_all = float(np.sqrt(np.mean(rmse["truth (noise floor)"] ** 2)))
    console.print(f"held-out q RMSE: fit {1e3 * fit_all:.3f} mrad = {fit_all / floor_all:.2f}× the noise floor "
                  f"({1e3 * floor_all:.3f} mrad); fit stored as fits/fit={fit_id}/ "
                  f"(`twinlake fit show {fit_id} --lake {lake}`)")
    campaign = None
    if cfg.campaign_episodes > 0:
        console.rule(f"{steps}/{steps} campaign: the held-out run on {cfg.campaign_episodes} arms from the fit's "
                     "posterior (fr3_stack's default guards)")
        campaign = closing_campaign(lake, fit_id, holdout[0], cfg, address=address, console=console,
                                    statuses=statuses)
    return {"campaign": campaign, "fit": fit_id, "verdict": {"level": verdict.level.value,
                                                             "reasons": list(verdict.reasons)},
            "lake": str(lake), "config": asdict(cfg), "screen_fit": screen_id,
            "screen_adequacy": screen_lines,
            "tool_kg": {"truth": cfg.tool_kg, "fit": rec.params.payload_mass},
            "truth": truth.to_vector().tolist(), "fitted": rec.vector.tolist(),
            "holdout_q_rmse_rad": {k: v.tolist() for k, v in rmse.items()},
            "holdout_rmse_ratio_to_floor": fit_all / floor_all,
            "truth_in_ci95": cover, "left_out_of_coverage": left_out, "error_bars_s": rec.extra.get("error_bars_s")}


def demo_cmd(
    lake: Optional[Path] = typer.Option(None, "--lake", parser=_lake_option, metavar="LAKE",
                                        help="Lake directory (default ./demo-lake)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Recordings directory (default ./demo-out)."),
    population: int = typer.Option(DemoConfig.population, "--population", min=2, help="CMA-ES population."),
    generations: int = typer.Option(DemoConfig.generations, "--generations", min=1, help="Generations."),
    seconds: float = typer.Option(DemoConfig.seconds, "--seconds", min=1.0, help="Excitation per run [s]."),
    refine_iterations: int = typer.Option(DemoConfig.refine_iterations, "--refine", min=0, help="Cap on the full-data Levenberg–Marquardt iterations (it stops earlier once converged)."),
    workers: int = typer.Option(DemoConfig.workers, "--workers", min=0, help="Ray actors (0: no Ray)."),
    seed: int = typer.Option(0, "--seed", help="Search seed."),
    tool_kg: float = typer.Option(DemoConfig.tool_kg, "--tool-kg", min=0.0,
                                  help="Mass of the tool the firmware does not know [kg] (0: no tool, one fit)."),
    campaign_episodes: int = typer.Option(DemoConfig.campaign_episodes, "--campaign-episodes", min=0,
                                          help="Episodes of the closing campaign on the held-out run (0: none)."),
    address: Optional[str] = typer.Option(None, "--address", help="Join this Ray cluster instead of a local one."),
    as_json: bool = typer.Option(False, "--json", help="Also print a JSON summary on stdout."),
) -> None:
    """Run the whole job on the bundled demo robot (with a tool its firmware does not know): record,
    ingest, fit on Ray (FrankaTwin's 29, flagged by its adequacy line; then with the payload),
    compare with the truth."""
    cfg = DemoConfig(seconds=seconds, population=population, generations=generations, workers=workers, seed=seed,
                     refine_iterations=refine_iterations, tool_kg=tool_kg, campaign_episodes=campaign_episodes,
                     screen_generations=min(DemoConfig.screen_generations, generations))
    try:
        summary = run_demo(_local_demo_lake(lake), out or Path("demo-out"), cfg, address=address)
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))


def _local_demo_lake(lake) -> Path:
    """The demo's lake: a local directory (default ./demo-lake). An s3:// lake is refused (the
    demo runs on embedded defaults; a bucket lake takes the same commands one by one,
    docs/lake.md "Object storage"); other URI schemes are refused by `--lake`'s parser."""
    from .catalog import LakeLocation

    if lake is None:
        return Path("demo-lake")
    if isinstance(lake, LakeLocation):
        fail(f"--lake {lake.uri}: the demo needs a local lake directory; an s3:// lake takes the "
             "commands the demo runs one by one (docs/lake.md, \"Object storage\")")
    return lake
