"""Mixed continuous/integer search: CMA-ES (pycma) over the normalised continuous box, and a
categorical distribution over the integer motor delay, updated from the elite.

Why not round a CMA coordinate: a rounded coordinate has zero gradient inside each step, so
CMA's covariance learns nothing about it and sigma collapses or stalls on a plateau. Instead
every generation:

1. CMA-ES proposes P points z in [0, 1]^n_free (pycma's bound transform);
2. the P candidates get delays by stratified sampling of the categorical distribution
   `delay_probs`: counts by largest remainder of P·p, then a seeded permutation assigns them;
3. after evaluation, CMA-ES is told the losses, and `delay_probs` moves toward the delay
   frequencies among the best half (mu = P // 2): p ← (1 − η)·p + η·freq_elite with
   η = `delay_rate` (0.3), then floored at `delay_floor` (0.02) and renormalised, so no delay
   is ever ruled out for good.
4. when delay offsets are free (`+joint-delay`), each free joint's offset is one more
   categorical distribution `offset_probs[j]` over `space.offset_choices(j)`, sampled and
   updated the same way, independently per joint (its own seeded stream, so a search without
   free offsets draws exactly as before).

The best candidate ever evaluated is kept (FrankaTwin reports `best_params_ever`, not the
mean). pycma samples from its own seeded RandomState (option `randn`, pickled with the
strategy); any draw it makes from numpy's global RNG runs on a saved state restored around each
call, so the search is isolated from other users of np.random and `state()` / `from_state()`
resume a search bit for bit.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np

from ..errors import SettingError
from ..core.space import ParameterSpace

DELAY_RATE = 0.3
DELAY_FLOOR = 0.02


@dataclass
class Proposal:
    """One generation's candidates: normalised z (P, n_free), delays (P,), full params (P, n)
    and the delay offsets (P, 7) (the space's base offsets when none is free)."""

    z: np.ndarray
    delays: np.ndarray
    params: np.ndarray
    offsets: np.ndarray | None = None


def stratified_counts(probs: np.ndarray, population: int) -> np.ndarray:
    """Integer counts (n,) summing to `population`, by largest remainder of population·probs
    (ties broken by lower index, so the result is deterministic)."""
    raw = np.asarray(probs, dtype=np.float64) * population
    counts = np.floor(raw).astype(np.int64)
    rest = population - int(counts.sum())
    order = np.lexsort((np.arange(len(raw)), -(raw - counts)))
    counts[order[:rest]] += 1
    return counts


def centred_probs(choices: np.ndarray, centre: int | None) -> np.ndarray:
    """A distribution over `choices`: uniform, or half the mass at `centre` (the rest spread)."""
    if centre is None or centre not in choices:
        return np.full(len(choices), 1.0 / len(choices))
    return np.where(choices == centre, 0.5, 0.5 / max(len(choices) - 1, 1))


def draw_categorical(choices: np.ndarray, probs: np.ndarray, population: int,
                     rng: np.random.Generator) -> np.ndarray:
    """`population` values of `choices` in the stratified counts of `probs`, in an order drawn
    from `rng` (one permutation)."""
    return np.repeat(choices, stratified_counts(probs, population))[rng.permutation(population)]


def updated_probs(probs: np.ndarray, choices: np.ndarray, elite_values: np.ndarray) -> np.ndarray:
    """A categorical's update from the elite's values: (1 − DELAY_RATE)·p + DELAY_RATE·freq,
    floored at DELAY_FLOOR and renormalised (module docstring, step 3)."""
    freq = np.array([(elite_values == v).mean() for v in choices])
    new = np.maximum((1 - DELAY_RATE) * probs + DELAY_RATE * freq, DELAY_FLOOR)
    return new / new.sum()


class MixedSearch:
    """CMA-ES + categorical delay over a ParameterSpace, seeded, with best-ever kept.

    Use `ask()` → evaluate `proposal.params` → `tell(proposal, losses)`; repeat.
    """

    def __init__(self, space: ParameterSpace, population: int, seed: int, sigma0: float = 0.3,
                 x0: np.ndarray | None = None, delay_probs: np.ndarray | None = None,
                 offsets0: np.ndarray | None = None) -> None:
        """`x0` (n_free,) the normalised start of CMA-ES (default the box centre);
        `delay_probs` the initial delay distribution (default uniform); `offsets0` (7,) centres
        each free joint's offset distribution there (half the mass; default uniform)."""
        if population < 2:
            raise SettingError("population", str(population), "expected at least 2 candidates")
        self.space = space
        self.population = int(population)
        self.seed = int(seed)
        self.generation = 0
        self.best_loss = float("inf")
        self.best_params: np.ndarray | None = None
        n_delays = len(space.delay_choices)
        self.delay_probs = (np.full(n_delays, 1.0 / n_delays) if delay_probs is None
                            else np.asarray(delay_probs, dtype=np.float64) / np.sum(delay_probs))
        self._delay_rng = np.random.default_rng([self.seed, 7])
        self.offset_probs = {j: centred_probs(space.offset_choices(j), None if offsets0 is None else offsets0[j])
                             for j in space.free_offset_joints}
        self._offset_rng = np.random.default_rng([self.seed, 11])
        n_free = len(space.free_indices)
        self._es = None
        self._cma_rng_state = None
        if n_free:
            import cma  # ~2 s of imports (scipy.stats, matplotlib): only where CMA-ES runs

            saved = np.random.get_state()
            try:
                self._es = cma.CMAEvolutionStrategy(
                    np.full(n_free, 0.5) if x0 is None else np.clip(np.asarray(x0, dtype=np.float64), 0.0, 1.0),
                    float(sigma0),
                    {
                        "randn": np.random.RandomState(self.seed).randn,  # pickled with the strategy
                        "popsize": self.population,
                        "bounds": [0.0, 1.0],
                        "verbose": -9,
                        "verb_log": 0,
                        "verb_disp": 0,
                        "tolfun": 0,
                        "tolx": 0,
                        "tolfunhist": 0,
                        "tolstagnation": 10**9,
                        "maxiter": 10**9,
                    },
                )
                self._cma_rng_state = np.random.get_state()
            finally:
                np.random.set_state(saved)

    @property
    def sigma(self) -> float:
        """CMA-ES step size in the normalised box (0 when nothing continuous is free)."""
        return float(self._es.sigma) if self._es is not None else 0.0

    def _with_cma_rng(self, fn):
        saved = np.random.get_state()
        np.random.set_state(self._cma_rng_state)
        try:
            return fn()
        finally:
            self._cma_rng_state = np.random.get_state()
            np.random.set_state(saved)

    def ask(self) -> Proposal:
        """The next generation's P candidates."""
        n_free = len(self.space.free_indices)
        if self._es is not None:
            z = np.array(self._with_cma_rng(self._es.ask), dtype=np.float64)
        else:
            z = np.zeros((self.population, n_free))
        delays = draw_categorical(self.space.delay_choices, self.delay_probs, self.population, self._delay_rng)
        offsets = np.tile(self.space.base_offsets, (self.population, 1))
        for j, probs in self.offset_probs.items():
            offsets[:, j] = draw_categorical(self.space.offset_choices(j), probs, self.population, self._offset_rng)
        return Proposal(z=z, delays=delays, params=self.space.decode(z, delays, offsets), offsets=offsets)

    def tell(self, proposal: Proposal, losses: np.ndarray) -> None:
        """Update CMA-ES, the delay distribution and the best-ever from losses (P,)."""
        losses = np.asarray(losses, dtype=np.float64).reshape(self.population)
        ranked = np.where(np.isfinite(losses), losses, np.inf)
        if self._es is not None:
            ok = np.isfinite(ranked)
            worst = float(ranked[ok].max()) if ok.any() else 0.0
            finite = np.where(ok, ranked, abs(worst) * 10 + 1e12)  # a failed rollout ranks last
            self._with_cma_rng(lambda: self._es.tell(list(proposal.z), finite.tolist()))
        elite = np.argsort(ranked, kind="stable")[: self.population // 2]
        self.delay_probs = updated_probs(self.delay_probs, self.space.delay_choices, proposal.delays[elite])
        for j, old in self.offset_probs.items():
            self.offset_probs[j] = updated_probs(old, self.space.offset_choices(j), proposal.offsets[elite, j])
        i = int(np.argmin(ranked))
        if ranked[i] < self.best_loss:
            self.best_loss = float(ranked[i])
            self.best_params = proposal.params[i].copy()
        self.generation += 1

    def state(self) -> bytes:
        """Everything needed to continue exactly: pickled bytes."""
        return pickle.dumps(
            {
                "space": self.space.to_json(),
                "population": self.population,
                "seed": self.seed,
                "generation": self.generation,
                "best_loss": self.best_loss,
                "best_params": self.best_params,
                "delay_probs": self.delay_probs,
                "delay_rng": self._delay_rng.bit_generator.state,
                "offset_probs": self.offset_probs,
                "offset_rng": self._offset_rng.bit_generator.state,
                "es": self._es,
                "cma_rng": self._cma_rng_state,
            },
            protocol=5,
        )

    @classmethod
    def from_state(cls, blob: bytes) -> "MixedSearch":
        """Rebuild a search saved with `state()`."""
        doc = pickle.loads(blob)
        self = cls.__new__(cls)
        self.space = ParameterSpace.from_json(doc["space"])
        self.population = doc["population"]
        self.seed = doc["seed"]
        self.generation = doc["generation"]
        self.best_loss = doc["best_loss"]
        self.best_params = doc["best_params"]
        self.delay_probs = doc["delay_probs"]
        self._delay_rng = np.random.default_rng()
        self._delay_rng.bit_generator.state = doc["delay_rng"]
        self.offset_probs = doc.get("offset_probs", {})  # a checkpoint made before per-joint delays: none free
        self._offset_rng = np.random.default_rng([self.seed, 11])
        if "offset_rng" in doc:
            self._offset_rng.bit_generator.state = doc["offset_rng"]
        self._es = doc["es"]
        self._cma_rng_state = doc["cma_rng"]
        return self
