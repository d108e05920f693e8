"""Python's cyclic garbage collector paused while a solve runs (as Pyomo pauses it while it builds and writes a
model: ``pyomo.common.gc_manager.PauseGC``).

A mechanism makes tens of thousands of small acyclic objects a round (placements, per-type job views), which
survive the young generations' collections while the round runs and so trigger full collections; each full
collection walks every object of the process (about 140,000 once numba and scipy are imported, 30-36 ms on this
project's machines, more in a notebook that holds a few dataframes). Pausing it made near-opt on 3 x 1024-GPU
type-free rounds about 8% faster in its benchmark and 8-30% in fresh processes (formulations/heterogeneous.md,
section 8); no difference was measured in the ideal ILP at 16384 GPUs. Reference counting still frees
everything at once; only cycles wait, until the collector runs again after the solve (at the first allocation
after it, so a simulator that allocates round after round does not grow). One exception: numba's first compile
of a function (an empty cache) leaves much cyclic garbage, which then waits until the call returns (a review
measured 410 MB against 313 MB at the peak of a first 64-GPU near-opt call).

The pause is process-wide (the collector is), so it is counted: the first of any threads to enter disables the
collector and the last to leave restores what the first found. As a decorator on a generator function it covers
making the generator, not iterating it (no solver here is one).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # calls inside a pause, over all threads
_was_enabled = False  # the collector's state when the outermost pause began


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside (a with-statement, or ``@paused_gc()`` on a function: each call pauses
    afresh); the last pause to end re-enables it if it was enabled when the first began, so nested, concurrent
    and already-disabled callers keep their state."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
