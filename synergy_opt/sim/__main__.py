"""``python -m synergy_opt.sim``: see :mod:`synergy_opt.sim.cli`."""

import sys

from synergy_opt.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
