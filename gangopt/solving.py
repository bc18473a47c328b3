"""solve(): the pipeline prefilter -> encoding -> CP-SAT -> plan. (Under construction.)"""

from __future__ import annotations

from typing import Literal

from gangopt.schema import Plan, Policy, Round

SolverName = Literal["cpsat", "greedy"]


def solve(rnd: Round, policy: Policy | None = None, *, solver: SolverName = "cpsat") -> Plan:
    """Decide one round. ``policy`` overrides ``rnd.policy``; ``solver='greedy'`` skips CP-SAT."""
    raise NotImplementedError
