"""Floats rounded to mantissa bits: values equal but for noise get one key, across powers of ten and two."""

from __future__ import annotations

import warnings

import numpy as np

from synergy_opt.float_keys import rounded_mantissa


def test_noise_around_powers_of_ten_and_two_gives_one_key() -> None:
    # Decimal rounding (round(v / 10**k) * 10**k) split these at 1e-9 ... 1e-4 and 1e3.
    for centre in [10.0**k for k in range(-12, 13)] + [2.0**k for k in range(-20, 21)]:
        noisy = centre * (1 + np.arange(-2000, 2001) * 2.2e-16)
        assert np.unique(rounded_mantissa(noisy, 30)).size == 1, centre


def test_real_differences_and_special_values_are_kept() -> None:
    assert rounded_mantissa([0.4999, 0.5001], 30)[0] < rounded_mantissa([0.4999, 0.5001], 30)[1]
    values = np.array([0.0, -0.5000000000000001, np.inf, -np.inf, 1e-320, 1e300])
    out = rounded_mantissa(values, 30)
    assert out[0] == 0.0 and out[1] == -0.5 and out[2] == np.inf and out[3] == -np.inf
    assert out[4] > 0 and abs(out[5] - 1e300) <= 1e300 * 2.0**-30
    assert np.isnan(rounded_mantissa([np.nan], 30)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        assert rounded_mantissa([np.finfo(float).max], 30)[0] == np.finfo(float).max
