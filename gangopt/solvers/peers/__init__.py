"""Emulations of the schedulers users run today (docs/peers.md), one module each:
:mod:`~gangopt.solvers.peers.koordinator`, :mod:`~gangopt.solvers.peers.volcano`,
:mod:`~gangopt.solvers.peers.kueue` and :mod:`~gangopt.solvers.peers.slurm`, on the shared
machinery of :mod:`~gangopt.solvers.peers.common` (itself built on the greedy engine's hooks).
Adding one is a new module here and one entry in :data:`gangopt.solvers.SOLVERS`."""

from gangopt.solvers.peers.koordinator import koordinator_like
from gangopt.solvers.peers.kueue import kueue_like
from gangopt.solvers.peers.slurm import SlurmBackfillLike, slurm_backfill_like
from gangopt.solvers.peers.volcano import volcano_like

__all__ = ["SlurmBackfillLike", "koordinator_like", "kueue_like", "slurm_backfill_like", "volcano_like"]
