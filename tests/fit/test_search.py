"""The mixed CMA-ES + categorical-delay search: determinism, exact resume, delay learning."""

from __future__ import annotations

import numpy as np
import pytest

from twinlake.fit.replay.search import MixedSearch, stratified_counts
from twinlake.fit.core.space import parse_space
from twinlake.sim import LAYOUT

DELAY_INDEX = LAYOUT.index("motor_delay_ms")


def _toy(space, delay_true=3):
    """A loss with a known optimum: quadratic in the normalised coordinates + a delay penalty."""
    target = np.linspace(0.2, 0.8, len(space.free_indices))

    def loss(params):
        z = space.encode(params)
        return ((z - target) ** 2).sum(1) + 0.5 * np.abs(params[:, DELAY_INDEX] - delay_true)

    return loss


def _run(search, loss, generations):
    for _ in range(generations):
        prop = search.ask()
        search.tell(prop, loss(prop.params))
    return search


def test_same_seed_same_bits_different_seed_differs():
    space = parse_space(["dynamic_ratio=0.5"])
    loss = _toy(space)
    a = _run(MixedSearch(space, 12, seed=4), loss, 8)
    b = _run(MixedSearch(space, 12, seed=4), loss, 8)
    c = _run(MixedSearch(space, 12, seed=5), loss, 8)
    assert np.array_equal(a.best_params, b.best_params) and a.best_loss == b.best_loss
    assert not np.array_equal(a.best_params, c.best_params)


def test_resume_from_state_continues_exactly_and_is_isolated_from_global_rng():
    space = parse_space(["dynamic_ratio=0.5,armature=0:0.6"])
    loss = _toy(space)
    straight = _run(MixedSearch(space, 10, seed=1), loss, 12)
    first = _run(MixedSearch(space, 10, seed=1), loss, 5)
    blob = first.state()
    np.random.seed(999)  # other users of numpy's global RNG must not matter
    np.random.rand(17)
    resumed = _run(MixedSearch.from_state(blob), loss, 7)
    assert resumed.generation == 12
    assert np.array_equal(resumed.best_params, straight.best_params)
    assert resumed.best_loss == straight.best_loss
    assert np.array_equal(resumed.delay_probs, straight.delay_probs)


def test_delay_distribution_concentrates_on_the_true_delay_and_best_is_kept():
    space = parse_space(["dynamic_ratio=0.5"])
    loss = _toy(space, delay_true=3)
    search = MixedSearch(space, 16, seed=2)
    bests = []
    for _ in range(25):
        prop = search.ask()
        search.tell(prop, loss(prop.params))
        bests.append(search.best_loss)
    assert int(search.best_params[DELAY_INDEX]) == 3
    assert int(np.argmax(search.delay_probs)) == 3
    assert search.delay_probs.min() >= 0.019  # floor keeps every delay reachable
    assert all(b2 <= b1 for b1, b2 in zip(bests, bests[1:]))  # best-ever never gets worse
    assert bests[-1] < bests[0] / 3


def test_delays_are_integers_and_counts_follow_probabilities():
    assert stratified_counts(np.array([0.5, 0.25, 0.25]), 8).tolist() == [4, 2, 2]
    assert stratified_counts(np.array([0.34, 0.33, 0.33]), 10).sum() == 10
    space = parse_space(["delay=1:2"])
    prop = MixedSearch(space, 9, seed=0).ask()
    assert set(prop.params[:, DELAY_INDEX].tolist()) <= {1.0, 2.0}
    assert np.all(prop.params >= space.bounds[:, 0]) and np.all(prop.params <= space.bounds[:, 1])


def test_only_delay_free_and_bad_population():
    space = parse_space(["armature=0.1,mu_static=1,dynamic_ratio=0.5,mu_viscous=1"])
    search = _run(MixedSearch(space, 6, seed=0), _toy(space, delay_true=1), 6)
    assert search.sigma == 0.0 and int(search.best_params[DELAY_INDEX]) == 1
    with pytest.raises(ValueError, match="population"):
        MixedSearch(space, 1, seed=0)
