"""``python -m synergy_opt.profiling [--write]``: refit the built-in job models and print their fit errors."""

from synergy_opt.profiling.fit import main

if __name__ == "__main__":
    main()
