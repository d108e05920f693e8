"""The pricing problem on an integer grid (synergy_opt/joint/grid.py) against every load of random servers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synergy_opt.instance import Cluster
from synergy_opt.joint.grid import Grid, grid_patterns, integer_grid
from synergy_opt.joint.pricing import Bonus, ItemTypes, best_patterns
from tests.test_joint_decomposition import FUZZ, all_loads, item_types


@st.composite
def near_multiples(draw: st.DrawFn) -> tuple[ItemTypes, np.ndarray]:
    """Servers and item types whose memory is a few parts in 10^4 off a common unit (as 20.83 GB is off a third of
    62.5 GB), CPUs whole or halves, capacities on a unit or off it."""
    gpus = draw(st.integers(1, 6))
    unit = draw(st.sampled_from([20.833333333, 62.5, 1.0]))
    slack = draw(st.sampled_from([0.0, 0.0, 1e-3, -1e-4]))
    cluster = Cluster(1, gpus, float(draw(st.integers(1, 4 * gpus))) / draw(st.sampled_from([1, 2])),
                      unit * (draw(st.integers(1, 4 * gpus)) + slack))
    count = draw(st.integers(1, 6))
    size = np.array([draw(st.integers(1, gpus)) for _ in range(count)])
    cpu = np.array([draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])) for _ in range(count)])
    mem = np.array([unit * draw(st.integers(1, 4)) * (1 - draw(st.sampled_from([0.0, 1.6e-4]))) for _ in range(count)])
    prices = np.array([draw(st.sampled_from([0.0, 0.3, 1.0, 1.7, 2.5])) for _ in range(count)])
    return ItemTypes(size, cpu, mem, cluster), prices


@FUZZ
@given(st.one_of(item_types(), near_multiples()))
def test_a_grid_decides_fits_exactly(case: tuple[ItemTypes, np.ndarray]) -> None:
    """Every load fits the server exactly when its rounded sums fit the grid."""
    items, _ = case
    grid = integer_grid(items.need, items.capacity)
    if grid is None:
        return
    loads = all_loads_unfiltered(items)
    on_grid = np.all(loads @ grid.need <= np.array(grid.shape) - 1, axis=1)
    assert np.array_equal(on_grid, items.fits(loads))


def all_loads_unfiltered(items: ItemTypes) -> np.ndarray:
    """Every load of at most ``G`` items of each type, fitting or not."""
    caps = np.full(items.size.size, items.cluster.gpus_per_server)
    grids = np.meshgrid(*[np.arange(c + 1) for c in caps], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


@settings(FUZZ, max_examples=150)
@given(st.one_of(item_types(), near_multiples()), st.data(), st.booleans())
def test_grid_pricing_is_the_best_load(case: tuple[ItemTypes, np.ndarray], data: st.DataObject, bonus_on: bool
                                       ) -> None:
    """The dense programme's best load against every load, with caps that bind and a bonus of one-component
    conditions (the branch rows on counts); the list programme gives the same value."""
    items, prices = case
    caps = np.full(prices.size, items.cluster.gpus_per_server)
    caps[1::2] = 2
    bonus = None
    if bonus_on:
        parts = data.draw(st.lists(st.tuples(st.integers(0, prices.size - 1), st.integers(1, 3)), max_size=4))
        values = [data.draw(st.sampled_from([-2.0, -0.4, 0.3, 1.1])) for _ in parts]
        bonus = Bonus.of_conditions([(p,) for p in parts], np.array(values))
    loads = all_loads(items, caps)
    worth = loads @ prices + (bonus.of(loads) if bonus is not None and bonus.value.size else 0.0)
    priced = best_patterns(items, prices, caps, count=3, bonus=bonus)
    assert priced.value == pytest.approx(max(float(worth.max()), 0.0), abs=1e-9)
    assert priced.value == pytest.approx(best_patterns(items, prices, caps, bonus=bonus, on_grid=False).value,
                                         abs=1e-9)
    if priced.value > 1e-9:
        assert items.fits(priced.patterns).all() and np.all(priced.patterns <= caps)
        found = priced.patterns @ prices + (bonus.of(priced.patterns) if bonus is not None and bonus.value.size
                                            else 0.0)
        assert np.allclose(found, priced.values) and priced.values[0] == pytest.approx(priced.value)
        assert len({p.tobytes() for p in priced.patterns}) == len(priced.patterns)


def test_the_familys_servers_have_small_grids() -> None:
    """16 GPUs, 48 CPUs, 1000 GB with the profiles' memory steps (20.83 GB, a third of 62.5 rounded): 20.83 GB
    takes one unit of 62.5 / 3, and the grid is 17 x 49 x 49; values not near a common unit have none."""
    cluster = Cluster(8, 16, 48.0, 1000.0)
    mem = np.array([20.83, 62.5, 125.0, 187.5, 250.0])
    items = ItemTypes(np.ones(5, dtype=np.int64), np.array([1.0, 2.0, 3.0, 9.0, 24.0]), mem, cluster)
    assert items.grid is not None and items.grid.shape == (17, 49, 49)
    assert items.grid.need[:, 2].tolist() == [1, 3, 6, 9, 12]
    odd = ItemTypes(np.ones(2, dtype=np.int64), np.array([1.0, 2.0]), np.array([1.0, np.pi]), cluster)
    assert odd.grid is None


def _array_passes(grid: Grid, value: np.ndarray, caps: np.ndarray, pay: np.ndarray | None, count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The dense programme as numpy array passes (one per count of each type; grid.py's before its compiled
    loops): cells improved only strictly, counts in increasing order, the best cells by a stable sort."""
    shape = grid.shape
    table = np.full(shape, -np.inf)
    table[0, 0, 0] = 0.0
    order = np.flatnonzero(caps > 0)
    choices = []
    for t in order:
        g, c, m = (int(v) for v in grid.need[t])
        most = int(caps[t])
        for step, size in ((g, shape[0]), (c, shape[1]), (m, shape[2])):
            if step:
                most = min(most, (size - 1) // step)
        grown, choice, worth = table.copy(), np.zeros(shape, dtype=np.int64), 0.0
        for n in range(1, most + 1):
            worth += float(value[t]) + (0.0 if pay is None else float(pay[t, n]))
            source = table[:shape[0] - n * g, :shape[1] - n * c, :shape[2] - n * m] + worth
            target = grown[n * g:, n * c:, n * m:]
            better = source > target
            np.copyto(target, source, where=better)
            np.copyto(choice[n * g:, n * c:, n * m:], n, where=better)
        table = grown
        choices.append(choice)
    flat = table.ravel()
    finite = np.flatnonzero(np.isfinite(flat))
    top = finite[np.argsort(-flat[finite], kind="stable")[:count]]
    loads = np.zeros((top.size, caps.size), dtype=np.int64)
    for row, cell in enumerate(top):
        at = np.array(np.unravel_index(int(cell), shape))
        for t, choice in zip(order[::-1], choices[::-1], strict=True):
            loads[row, t] = choice[tuple(at)]
            at = at - loads[row, t] * grid.need[t]
    return loads, flat[top]


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_programme_is_the_array_passes(seed: int) -> None:
    """Same loads, values and order of ties as the array passes, on random grids with many equal values (prices
    of 0, 0.5 and 1, and bonuses), with and without a bonus; it fails if ties go to more items or cells out of
    order."""
    rng = np.random.default_rng(seed)
    for trial in range(150):
        shape = (int(rng.integers(2, 10)), int(rng.integers(2, 15)), int(rng.integers(2, 15)))
        types = int(rng.integers(1, 8))
        grid = Grid(np.stack([rng.integers(1, 4, types), rng.integers(0, 5, types), rng.integers(0, 5, types)],
                             axis=1), shape)
        value = rng.integers(0, 3, types) * 0.5 if trial % 2 else np.round(rng.normal(1, 1, types), 1)
        caps = rng.integers(0, 5, types)
        pay = np.round(rng.normal(0, 0.5, (types, int(caps.max()) + 2)), 1) if trial % 3 == 0 else None
        count = int(rng.integers(1, 20))
        expected, got = _array_passes(grid, value, caps, pay, count), grid_patterns(grid, value, caps, pay, count)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
