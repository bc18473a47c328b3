"""Hypothesis profiles for the property tests (see docs/property-tests.md).

* ``default``: what CI runs. Each property test sets its own ``max_examples`` through
  :func:`tests.strategies.examples`, which keeps the counts written in the test.
* ``nightly``: 20 times as many examples everywhere, no deadline, and a reproduction blob
  printed with every failure. Select it with ``HYPOTHESIS_PROFILE=nightly`` or
  ``--hypothesis-profile=nightly``.
* ``quick``: a tenth of the examples, for a fast local smoke run while editing.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "nightly",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("quick", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "default")
