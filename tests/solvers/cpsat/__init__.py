"""Tests of gangopt.solvers.cpsat, one module per module of the package (issue 11).

The encoding is checked alone: a tiny round, its model solved by a plain CP-SAT solver with
a decision forced, and the rule's verdict (feasible or infeasible) asserted. Shared probes
are in :mod:`tests.solvers.cpsat.probe`.
"""
