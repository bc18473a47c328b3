"""The wire-byte writer of linear models (``gangopt/lp_wire.py``): byte for byte the model the
protobuf API builds one field at a time, on random rows, variables and index sizes (indices
past 3 varint bytes go through the API)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gangopt.lp_wire import Rows, add_pair_rows, add_row, add_variables
from tests.strategies import examples


def _model() -> Any:
    from ortools.linear_solver import linear_solver_pb2

    model = linear_solver_pb2.MPModelProto()
    model.variable.add(lower_bound=0.0, upper_bound=1.0)  # something before, which stays first
    return model


@settings(max_examples=examples(40), deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, (1 << 21) - 1), st.integers(0, (1 << 21) - 1)), max_size=30),
    upper=st.floats(-5, 5, allow_nan=False),
    coeff=st.sampled_from([(1.0, -1.0), (-1.0, -1.0), (0.5, 2.0)]),
)
def test_pair_rows_are_the_rows_the_api_adds(
    pairs: list[tuple[int, int]], upper: float, coeff: tuple[float, float]
) -> None:
    fast, slow = _model(), _model()
    add_pair_rows(fast, np.asarray(pairs, dtype=np.int64).reshape(-1, 2), coeff, upper)
    for a, b in pairs:
        slow.constraint.add(var_index=[a, b], coefficient=list(coeff), lower_bound=-math.inf, upper_bound=upper)
    assert fast.SerializeToString() == slow.SerializeToString()


@settings(max_examples=examples(40), deadline=None)
@given(
    bounds=st.lists(st.tuples(st.floats(0, 64, allow_nan=False), st.floats(-9, 9, allow_nan=False)), max_size=20),
    with_objective=st.booleans(),
)
def test_variables_are_the_variables_the_api_adds(bounds: list[tuple[float, float]], with_objective: bool) -> None:
    upper = np.asarray([u for u, _ in bounds], dtype=float)
    objective = np.asarray([c for _, c in bounds], dtype=float) if with_objective else None
    fast, slow = _model(), _model()
    add_variables(fast, upper, objective)
    for i, u in enumerate(upper.tolist()):
        v = slow.variable.add(lower_bound=0.0, upper_bound=u)
        if objective is not None:
            v.objective_coefficient = float(objective[i])
    assert fast.SerializeToString() == slow.SerializeToString()


@settings(max_examples=examples(40), deadline=None)
@given(
    rows=st.lists(
        st.dictionaries(st.integers(0, 1 << 22), st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=12),
        max_size=6,
    ),
    upper=st.floats(-5, 5, allow_nan=False),
)
def test_rows_are_the_rows_the_api_adds(rows: list[dict[int, float]], upper: float) -> None:
    fast, slow = _model(), _model()
    for row in rows:
        idx = np.asarray(sorted(row), dtype=np.int64)
        coeff = np.asarray([row[i] for i in sorted(row)], dtype=float)
        add_row(fast, idx, coeff, upper)
        ct = slow.constraint.add()
        ct.lower_bound, ct.upper_bound = -math.inf, upper
        ct.var_index.extend(idx.tolist())
        ct.coefficient.extend(coeff.tolist())
    assert fast.SerializeToString() == slow.SerializeToString()


@settings(max_examples=examples(40), deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(
                st.just("row"),
                st.dictionaries(st.integers(0, 1 << 22), st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=9),
                st.floats(-5, 5, allow_nan=False),
            ),
            st.tuples(
                st.just("pairs"),
                st.lists(st.tuples(st.integers(0, (1 << 21) - 1), st.integers(0, (1 << 21) - 1)), max_size=5),
                st.floats(-5, 5, allow_nan=False),
            ),
        ),
        max_size=12,
    ),
)
def test_kept_rows_are_the_rows_added_one_by_one(steps: list[tuple[str, Any, float]]) -> None:
    """:class:`Rows` (rows kept, then written at once; pair rows after the rows before them):
    the bytes of :func:`add_row` and :func:`add_pair_rows` called in the same order."""
    fast, slow = _model(), _model()
    kept = Rows(fast)
    for kind, what, upper in steps:
        if kind == "row":
            idx = np.asarray(sorted(what), dtype=np.int64)
            coeff = np.asarray([what[i] for i in sorted(what)], dtype=float)
            kept.add(idx, coeff, upper)
            add_row(slow, idx, coeff, upper)
        else:
            pairs = np.asarray(what, dtype=np.int64).reshape(-1, 2)
            kept.pairs(pairs, (1.0, -1.0), upper)
            add_pair_rows(slow, pairs, (1.0, -1.0), upper)
    kept.flush()
    kept.flush()  # nothing left: writes nothing
    assert fast.SerializeToString() == slow.SerializeToString()


def test_a_wrong_field_would_show() -> None:
    """The comparison can fail: a row written with another upper bound is not the API's row."""
    fast, slow = _model(), _model()
    add_row(fast, np.asarray([0, 3]), np.asarray([1.0, 2.0]), 1.0)
    slow.constraint.add(var_index=[0, 3], coefficient=[1.0, 2.0], lower_bound=-math.inf, upper_bound=2.0)
    assert fast.SerializeToString() != slow.SerializeToString()
    assert list(fast.constraint[0].var_index) == [0, 3] and fast.constraint[0].upper_bound == 1.0
