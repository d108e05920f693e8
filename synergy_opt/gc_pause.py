"""Python's cyclic garbage collector paused while a solve runs (as Pyomo pauses it while it builds and writes a
model: ``pyomo.common.gc_manager.PauseGC``).

A mechanism makes tens of thousands of small acyclic objects a round (placements, per-type job views), which
survive the young generations' collections while the round runs and so trigger full collections; each full
collection walks every object of the process (about 140,000 once numba and scipy are imported, 36 ms on this
project's machines, more in a notebook that holds a few dataframes). Pausing it saves 8-25% of near-opt's time
on 3 x 1024-GPU type-free rounds (formulations/heterogeneous.md, section 8); it changed nothing measurable in
the ideal ILP at 16384 GPUs or in the simulator's loop. Reference counting still frees everything at once;
only cycles wait, until the collector runs again after the solve.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside (a with-statement, or ``@paused_gc()`` on a function: each call pauses
    afresh); re-enable it on the way out only if it was enabled on the way in, so that nested and
    already-disabled callers keep their state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
