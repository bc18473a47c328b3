"""gangopt: optimal gang placement for GPU clusters.

One scheduling round (cluster, running gangs, pending gangs, quotas, policy) goes in; a plan
(which gangs start where, what is preempted or resized, why the rest waits) comes out::

    import gangopt
    rnd = gangopt.load_round("instances/basic.json")
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []

Pipeline: schema -> prefilter -> encoding -> solving -> plan -> validation.
"""

from gangopt import startup
from gangopt.gcpause import fewer_collections

# The gangopt command's process: one OpenBLAS thread before numpy is imported, and the imports
# frozen after (gangopt.startup; a library caller's process is left as it is).
_command = startup.prepare()

# Importing builds pydantic's validators: hundreds of thousands of objects, no garbage among
# them (gangopt.gcpause: the collector's runs cost 7 % of a whole S solve).
with fewer_collections():
    from gangopt.io import load_plan, load_round
    from gangopt.schema import Plan, Policy, Round, Status
    from gangopt.solve import solve
    from gangopt.validation import Violation, validate

    startup.imported(_command)

__all__ = ["Plan", "Policy", "Round", "Status", "Violation", "load_plan", "load_round", "solve", "validate"]
__version__ = "0.1.0"
