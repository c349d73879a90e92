"""Progress display of a fit on stderr: one rich bar advancing per generation, with best,
mean, sigma, evaluations/s and ETA; when stderr is not a terminal (logs, CI, `ray job
submit`), one plain line per generation instead; silent when disabled."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class FitProgress:
    """Context manager: `update(generation, best, mean, sigma, evals_per_s, eta_s)`."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, label: str = "fit") -> None:
        self.enabled = enabled
        self._console = Console(stderr=True)
        self._lines = enabled and not self._console.is_terminal  # logs/CI: one plain line per update
        self._label = label
        self._total = total
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            console=self._console,
            disable=not enabled or self._lines,
            transient=False,
        )
        self._task = self._progress.add_task(label, total=total, completed=done, stats="starting workers")

    def __enter__(self) -> "FitProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def update(self, generation: int, best: float, mean: float, sigma: float,
               evals_per_s: float, eta_s: float) -> None:
        stats = (
            f"best {best:.4g}  mean {mean:.4g}  σ {sigma:.3f}  "
            f"{evals_per_s:.1f} evals/s  ETA {eta_s:.0f} s"
        )
        self._progress.update(self._task, completed=generation, stats=stats)
        if self._lines:
            self._console.print(f"{self._label} generation {generation}/{self._total}: {stats}", highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self._progress.update(self._task, stats=text)
        if self._lines:
            self._console.print(f"{self._label}: {text}", highlight=False, soft_wrap=True)


def stage_note(enabled: bool, label: str, text: str) -> None:
    """One line on stderr for a stage outside the generation bar (silent when disabled)."""
    if enabled:
        Console(stderr=True).print(f"{label}: {text}", highlight=False, soft_wrap=True)
