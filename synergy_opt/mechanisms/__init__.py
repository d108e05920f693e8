"""Scheduling mechanisms: each packs one round into a :class:`~synergy_opt.mechanisms.state.ServerState`."""
