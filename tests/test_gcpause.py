"""The collector's thresholds inside and after :func:`gangopt.gcpause.fewer_collections`."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gangopt.gcpause import THRESHOLD, fewer_collections


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after_even_on_error() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold() == (THRESHOLD, 10, 10)
        raise RuntimeError
    assert gc.get_threshold() == (700, 10, 10)


def test_a_callers_higher_threshold_and_a_disabled_one_are_kept() -> None:
    gc.set_threshold(THRESHOLD * 2, 5, 5)
    with fewer_collections():
        assert gc.get_threshold() == (THRESHOLD * 2, 5, 5)
    gc.set_threshold(0, 10, 10)  # automatic collection off: not switched back on
    with fewer_collections():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)
