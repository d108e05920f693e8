"""What the generators draw is the same on every CPU: synergy_opt.portable goes through the C library."""

from __future__ import annotations

import math

import numpy as np

from synergy_opt.portable import exp, power_of_ten


def test_exp_is_the_c_librarys_element_by_element() -> None:
    values = np.random.default_rng(0).standard_normal((300, 7)) * 0.3
    result = exp(values)
    assert result.shape == values.shape and result.dtype == float
    assert all(result.flat[i] == math.exp(values.flat[i]) for i in range(values.size))
    assert exp(np.float64(0.25)).shape == () and exp(np.float64(0.25)).item() == math.exp(0.25)


def test_exp_overflows_to_infinity_as_numpy_does() -> None:
    assert exp([1000.0, -1000.0]).tolist() == [math.inf, 0.0]


def test_power_of_ten_is_the_c_librarys_pow() -> None:
    exponents = np.random.default_rng(1).uniform(1.5, 4.0, 500)
    assert power_of_ten(exponents).tolist() == [math.pow(10.0, e) for e in exponents.tolist()]
