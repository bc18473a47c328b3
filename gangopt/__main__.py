"""``python -m gangopt``: the same CLI as the ``gangopt`` script, for environments without it on PATH."""

import sys

from gangopt.cli import main

sys.exit(main())
