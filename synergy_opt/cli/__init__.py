"""What both command lines (``python -m synergy_opt.bench``, ``python -m synergy_opt.sim``) share.

- :mod:`~synergy_opt.cli.args`: argument types (sizes, seeds, splits, name lists) with one-line errors;
- :mod:`~synergy_opt.cli.errors`: the parser and wrapper that print one line and exit 2 (bad input) or 1;
- :mod:`~synergy_opt.cli.parallel`: running independent jobs in order, serially, in processes or on Dask.
"""
