"""The finisher's clock for the waiting reasons (gangopt/annotate.py)."""

from __future__ import annotations

import time

import pytest

from gangopt import annotate as finisher
from gangopt.reasons import UNCHECKED
from gangopt.result import Result
from tests.test_reasons import _three_waiting


def _unchecked(deadline: float) -> int:
    rnd, plan = _three_waiting()
    done = finisher.annotate(rnd, Result(plan=plan, stats=plan.stats), deadline=deadline, lp_bounds=False)
    return sum(1 for w in done.waiting if w.reasons[-1] == UNCHECKED)


def test_the_reasons_leave_the_validator_its_own_cost_not_the_search_clocks_reserve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reasons stop :func:`~gangopt.annotate.validator_seconds` before the deadline. At XL
    they stopped the search clock's validation reserve before it (4.64 s for a 0.59 s
    validation) and no waiting gang was ever checked: a reserve of an hour here must not cut
    them, a validator of an hour must."""
    monkeypatch.setattr(finisher, "VALIDATION_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 0
    monkeypatch.setattr(finisher, "VALIDATOR_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 3


def test_the_plans_view_is_not_built_when_it_would_end_past_the_reasons_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view (:data:`~gangopt.annotate.REASONS_VIEW_SECONDS_PER_POD`) ending past the reasons'
    deadline: every waiting gang unchecked, none half done."""
    monkeypatch.setattr(finisher, "REASONS_VIEW_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 3
