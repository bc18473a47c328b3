"""How large a model the time limit allows, before any of it is built.

Building the model costs Python time per variable; a model that cannot be built and searched
within the limit is not built whole. The guard estimates the model from the prefilter's fit
table and says whether to build it whole, restricted around the greedy plan
(:mod:`~gangopt.solvers.cpsat.neighbourhood`), or not at all, and whether the search needs a
child process that can be killed (:mod:`~gangopt.solvers.cpsat.child`).
"""

from __future__ import annotations

from gangopt.prefilter import Prefiltered

BUILD_SECONDS_PER_VARIABLE = 3.5e-5
"""Measured model build cost per *estimated* variable on this project's 2-core machines
(``instances/scale-M.json``: 58,658 estimated, 61,330 built, 1.8 s)."""
BUILD_SHARE = 0.5
"""A model whose estimated build takes more than this share of the time limit is not built."""
RESTRICTED_SHARE = 4
"""A restricted model aims at this fraction (1/n) of the build budget: its classes split into
single nodes more often, so it builds more variables per candidate placement."""
IN_PROCESS_VARIABLES = 5_000
"""Models estimated below this many variables are searched in-process even with
``policy.hard_limit``: CP-SAT keeps its own limits on models this small (the overruns the
child guards against are presolves of large models), and the fork costs about 45 ms, a fifth
of a 128-node round (``instances/scale-S.json``: 0.175 s in-process, 0.221 s forked, medians of
15 alternating runs)."""


def estimated_variables(pre: Prefiltered) -> int:
    """Pod-count variables the model would create (the bulk of it), from the fit table."""
    kept = set(pre.pending)
    growers = set(pre.growers)
    return sum(
        int((fit > 0).sum())
        for key, fit in pre.fits.items()
        if key.gang in (kept if key.kind == "pending" else growers)
    )


def build_budget(seconds: float) -> int:
    """Estimated variables that ``seconds`` left for the search allow to build (see :data:`BUILD_SHARE`)."""
    return int(BUILD_SHARE * seconds / BUILD_SECONDS_PER_VARIABLE)
