"""``python -m synergy_opt.bench``: see :mod:`synergy_opt.bench.cli`."""

import sys

from synergy_opt.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
