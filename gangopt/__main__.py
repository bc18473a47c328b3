"""``python -m gangopt``: the same CLI as the ``gangopt`` script, for environments without it on PATH."""

from gangopt.cli import run

run()
