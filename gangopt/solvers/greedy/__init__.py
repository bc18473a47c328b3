"""The greedy solver: one gang at a time, the way Kubernetes gang plugins decide.

:func:`greedy` is three things at once: ``--solver greedy`` for comparisons, the warm start
CP-SAT searches from, and the fallback when CP-SAT finds nothing in time. The engine
(:mod:`~gangopt.solvers.greedy.engine`) is also the base the peer emulations
(:mod:`gangopt.solvers.peers`) specialise through its documented hooks.
"""

from gangopt.solvers.greedy.engine import greedy

__all__ = ["greedy"]
