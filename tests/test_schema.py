"""gangopt.schema: Policy.after, the policy of a solve that starts part-way into its limit."""

from __future__ import annotations

import pytest

from gangopt.schema import SOLVE_FLOOR, Policy


def test_after_takes_the_time_spent_off_and_pins_the_work() -> None:
    policy = Policy(time_limit=10.0).after(2.5)
    assert policy.time_limit == pytest.approx(7.5)
    assert policy.work == pytest.approx(Policy(time_limit=10.0).work)


def test_after_keeps_an_explicit_work_limit_and_the_floor() -> None:
    policy = Policy(time_limit=4.0, work_limit=9.0).after(100.0)
    assert policy.time_limit == pytest.approx(SOLVE_FLOOR * 4.0)
    assert policy.work_limit == 9.0


@pytest.mark.parametrize("policy", [Policy(deterministic=True), Policy()])
def test_after_changes_nothing_when_deterministic_or_nothing_was_spent(policy: Policy) -> None:
    spent = 3.0 if policy.deterministic else 0.0
    assert policy.after(spent) is policy


@pytest.mark.parametrize("min_members", [None, 1, 3, 4])
@pytest.mark.parametrize("max_members", [None, 2, 4])
@pytest.mark.parametrize("min_replicas", [None, 0, 2])
def test_elastic_is_a_minimum_below_the_maximum(
    min_members: int | None, max_members: int | None, min_replicas: int | None
) -> None:
    """``elastic`` answers a gang with no minimum set without computing its totals: the answer
    is still ``minimum < maximum``, read from the totals themselves."""
    from tests.builders import pending, role

    roles = [role("a", 2, min_replicas=min_replicas), role("b", 2)]
    try:
        gang = pending("g", roles=roles, min_members=min_members, max_members=max_members)
    except ValueError:
        return  # a combination the schema refuses
    fresh = pending("g", roles=roles, min_members=min_members, max_members=max_members)
    assert gang.elastic == (fresh.minimum < fresh.maximum)
