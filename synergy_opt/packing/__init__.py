"""What Synergy-TUNE and OPT's rounding share: the round's servers and how jobs are packed onto them.

- :mod:`~synergy_opt.packing.state`: :class:`ServerState`, free resources and each job's placements;
- :mod:`~synergy_opt.packing.place`: best-fit placement with TUNE's fallbacks (switch to proportional, then
  demote peers);
- :mod:`~synergy_opt.packing.demotion`: lowering above-proportional jobs just enough to make room;
- :mod:`~synergy_opt.packing.order`: policy order and runs of equal demands.
"""
