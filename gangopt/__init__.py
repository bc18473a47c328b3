"""gangopt: optimal gang placement for GPU clusters.

One scheduling round (cluster, running gangs, pending gangs, quotas, policy) goes in; a plan
(which gangs start where, what is preempted or resized, why the rest waits) comes out::

    import gangopt
    rnd = gangopt.load_round("instances/basic.json")
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []

Pipeline: schema -> prefilter -> encoding -> solving -> plan -> validation.
"""

from gangopt.io import load_plan, load_round
from gangopt.schema import Plan, Policy, Round, Status
from gangopt.solve import solve
from gangopt.validation import Violation, validate

__all__ = ["Plan", "Policy", "Round", "Status", "Violation", "load_plan", "load_round", "solve", "validate"]
__version__ = "0.1.0"
