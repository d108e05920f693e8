"""Floats rounded to a number of mantissa bits, to compare values equal but for float noise.

``np.round(v / unit) * unit`` with a decimal unit is not canonical: the product of two rounded numbers lands on
either side of a power of ten (``1e9 * 1e-6`` is 999.9999999999999, ``1e8 * 1e-5`` is 1000.0), so values that
are equal but for noise on either side of one got different keys. Rounding the binary mantissa is exact: the
rounded value is a short integer times a power of two, and a mantissa rounded up to 1 is the next power of two,
the same float as the next binade's smallest.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def rounded_mantissa(values: ArrayLike, bits: int) -> np.ndarray:
    """``values`` with their mantissas rounded to ``bits`` bits (relative precision ``2**-bits``; 0, inf and NaN
    as they are, and a value within ``2**-bits`` of the largest float, which would round past it). Values within
    about ``2**-bits`` of each other map to one float unless a rounding boundary lies between them."""
    array = np.asarray(values, dtype=float)
    mantissa, exponent = np.frexp(array)
    with np.errstate(invalid="ignore", over="ignore"):
        rounded = np.ldexp(np.round(np.ldexp(mantissa, bits)), exponent - bits)
    return np.where(np.isfinite(rounded), rounded, array)
