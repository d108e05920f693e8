"""The trace-driven, round-based cluster simulator: traces, policies, every mechanism in the loop, JCT."""

from synergy_opt.sim.allocators import mechanism_names
from synergy_opt.sim.engine import simulate
from synergy_opt.sim.hetero_run import HeteroRun  # registers the heterogeneous loop with simulate
from synergy_opt.sim.philly import philly_trace
from synergy_opt.sim.policies import POLICIES, JobStates
from synergy_opt.sim.result import SimResult
from synergy_opt.sim.trace import Trace, TraceJob, generate_trace, with_profiling_delay
from synergy_opt.sim.trace_io import load_trace, save_trace

__all__ = [
    "POLICIES",
    "HeteroRun",
    "JobStates",
    "SimResult",
    "Trace",
    "TraceJob",
    "generate_trace",
    "load_trace",
    "mechanism_names",
    "philly_trace",
    "save_trace",
    "simulate",
    "with_profiling_delay",
]
