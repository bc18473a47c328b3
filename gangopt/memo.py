"""Values derived from an input object, kept on that object: no module-global caches.

A round (or its cluster) is immutable once parsed, and several stages of one solve derive
the same things from it (the objective's per-gang terms, the cluster's capacity matrix and
eligibility masks); a replay decides thousands of rounds on one cluster object. Each derived
value lives in the object's private ``_derived`` store and is valid while the inputs it was
built from are the very same objects: ``model_copy(update=...)`` shares the store but
replaces an input, so a copy never sees a value derived from what it replaced. The store
dies with its object; two threads deriving the same value at once both compute it (the
values are pure), nothing else is shared.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")


class HasDerived(Protocol):
    """A model with a private store of derived values (``Round``, ``Cluster``)."""

    @property
    def derived_store(self) -> dict[Hashable, tuple[tuple[object, ...], Any]]: ...


def derived(owner: HasDerived, key: Hashable, inputs: tuple[object, ...], build: Callable[[], T]) -> T:
    """``build()`` once per ``owner`` and ``key`` while ``inputs`` are the same objects."""
    store = owner.derived_store
    hit = store.get(key)
    if hit is not None and len(hit[0]) == len(inputs) and all(a is b for a, b in zip(hit[0], inputs, strict=True)):
        return cast(T, hit[1])
    value = build()
    store[key] = (inputs, value)
    return value
