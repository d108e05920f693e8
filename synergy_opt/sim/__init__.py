"""The trace-driven, round-based cluster simulator: traces, policies, every mechanism in the loop, JCT."""

from synergy_opt.sim.trace import Trace, TraceJob, generate_trace

__all__ = ["Trace", "TraceJob", "generate_trace"]
