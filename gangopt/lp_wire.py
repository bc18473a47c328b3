"""Rows and variables of OR-Tools linear models (``MPModelProto``) written as protobuf wire
bytes with numpy and merged into the model at once, instead of one protobuf API call per
field: the fragmented 4,096-node round's two slot tier models (36,000 rows of two variables,
27,000 variables) went from 0.45 to 0.27-0.30 CPU-s (docs/benchmarks.md, "h29-L").

A merge appends to repeated fields in order, so the model is the same, field for field, as the
one the API builds (tests/test_lp_wire.py checks it byte for byte on random rows). Field
numbers of ortools' linear_solver.proto: MPModelProto.variable 3 and .constraint 4 (messages);
MPVariableProto lower_bound 1, upper_bound 2, objective_coefficient 3 (doubles);
MPConstraintProto lower_bound 2, upper_bound 3 (doubles), var_index 6 (packed int32),
coefficient 7 (packed doubles). Indices that would need more than 3 varint bytes (not seen:
the slot models have < 10^5 variables) go through the API instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ortools.linear_solver import linear_solver_pb2

_VARINT_LIMIT = 1 << 21
"""Variable indices below this take at most 3 bytes as varints (the models here have < 10^5)."""

_LOWER_INF = b"\x11" + np.float64(-math.inf).astype("<f8").tobytes()
"""A constraint's ``lower_bound = -inf``, as wire bytes."""


def _varint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_table(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per value (each in [0, :data:`_VARINT_LIMIT`)), its varint in 3 byte slots and which
    slots it uses."""
    v = values.astype(np.int64)
    table = np.empty((len(v), 3), dtype=np.uint8)
    table[:, 0] = (v & 0x7F) | np.where(v >= 0x80, 0x80, 0)
    table[:, 1] = ((v >> 7) & 0x7F) | np.where(v >= 0x4000, 0x80, 0)
    table[:, 2] = (v >> 14) & 0x7F
    used = np.ones((len(v), 3), dtype=bool)
    used[:, 1] = v >= 0x80
    used[:, 2] = v >= 0x4000
    return table, used


def _varints(values: np.ndarray) -> bytes:
    """``values`` (each in [0, :data:`_VARINT_LIMIT`)) as packed varints."""
    table, used = _varint_table(values)
    return bytes(table[used].tobytes())


def _doubles(values: np.ndarray) -> np.ndarray:
    """Per value, its 8 little-endian bytes (one row each)."""
    return np.ascontiguousarray(np.asarray(values, dtype="<f8")).view(np.uint8).reshape(-1, 8)


def add_variables(
    model: linear_solver_pb2.MPModelProto, upper: np.ndarray, objective: np.ndarray | None = None
) -> None:
    """Variables ``[0, upper[i]]`` (with ``objective[i]`` as their objective coefficient when
    given), appended in order: as ``model.variable.add(lower_bound=0.0, upper_bound=...,
    objective_coefficient=...)`` one by one."""
    n = len(upper)
    if n == 0:
        return
    fields = [(0x09, np.zeros(n)), (0x11, upper)] + ([] if objective is None else [(0x19, objective)])
    size = 9 * len(fields)
    rows = np.empty((n, 2 + size), dtype=np.uint8)
    rows[:, 0], rows[:, 1] = 0x1A, size
    for k, (tag, values) in enumerate(fields):
        rows[:, 2 + 9 * k] = tag
        rows[:, 3 + 9 * k : 11 + 9 * k] = _doubles(values)
    model.MergeFromString(rows.tobytes())


def add_pair_rows(
    model: linear_solver_pb2.MPModelProto, pairs: np.ndarray, coeff: tuple[float, float], upper: float
) -> None:
    """Rows ``coeff[0] · x[a] + coeff[1] · x[b] <= upper`` for each ``(a, b)`` of ``pairs``,
    appended in order: as ``model.constraint.add(var_index=[a, b], coefficient=coeff,
    lower_bound=-inf, upper_bound=upper)`` one by one."""
    n = len(pairs)
    if n == 0:
        return
    if int(pairs.max()) >= _VARINT_LIMIT or int(pairs.min()) < 0:  # not seen: one by one
        for a, b in pairs.tolist():
            model.constraint.add(var_index=[a, b], coefficient=list(coeff), lower_bound=-math.inf, upper_bound=upper)
        return
    first, first_used = _varint_table(pairs[:, 0])
    second, second_used = _varint_table(pairs[:, 1])
    packed = first_used.sum(axis=1) + second_used.sum(axis=1)
    # 0x22 len | 0x11 -inf | 0x19 upper | 0x32 len a b | 0x3a 16 coeff[0] coeff[1]
    rows = np.empty((n, 2 + 18 + 2 + 6 + 18), dtype=np.uint8)
    used = np.ones(rows.shape, dtype=bool)
    rows[:, 0] = 0x22
    rows[:, 1] = 18 + 2 + packed + 18
    rows[:, 2:11] = np.frombuffer(_LOWER_INF, dtype=np.uint8)
    rows[:, 11] = 0x19
    rows[:, 12:20] = _doubles(np.array([upper]))
    rows[:, 20], rows[:, 21] = 0x32, packed
    rows[:, 22:25], used[:, 22:25] = first, first_used
    rows[:, 25:28], used[:, 25:28] = second, second_used
    rows[:, 28], rows[:, 29] = 0x3A, 16
    rows[:, 30:38] = _doubles(np.array([coeff[0]]))
    rows[:, 38:46] = _doubles(np.array([coeff[1]]))
    model.MergeFromString(rows[used].tobytes())


def add_row(model: linear_solver_pb2.MPModelProto, idx: np.ndarray, coeff: np.ndarray, upper: float) -> None:
    """The row ``sum(coeff[i] · x[idx[i]]) <= upper`` (``idx`` ascending, no repeats, not
    empty), appended: as ``model.constraint.add()`` with ``lower_bound = -inf``, ``upper_bound
    = upper`` and ``var_index``, ``coefficient`` extended by ``idx`` and ``coeff``."""
    if idx[-1] >= _VARINT_LIMIT:  # not seen: the encoder writes indices of 3 bytes at most
        ct = model.constraint.add()
        ct.lower_bound = -math.inf
        ct.upper_bound = upper
        ct.var_index.extend(idx.tolist())
        ct.coefficient.extend(coeff.tolist())
        return
    body = _varints(idx)
    values = np.asarray(coeff, dtype="<f8").tobytes()
    head = _LOWER_INF + b"\x19" + np.float64(upper).astype("<f8").tobytes()
    head += b"\x32" + _varint_bytes(len(body)) + body + b"\x3a" + _varint_bytes(len(values)) + values
    model.MergeFromString(b"\x22" + _varint_bytes(len(head)) + head)


class Rows:
    """Rows for one model, kept in order and written by :meth:`flush` at once: the varints of
    every kept row's indices in one numpy pass and one merge, instead of :func:`add_row`'s
    numpy calls and merge per row (the fragmented L round's two slot tier models have 2,478
    such rows of 285 indices on average). Pair rows (:meth:`pairs`) flush the rows before
    them first, so the model's rows stay in the order they were given."""

    def __init__(self, model: linear_solver_pb2.MPModelProto) -> None:
        self.model = model
        self._idx: list[np.ndarray] = []
        self._coeff: list[np.ndarray] = []
        self._upper: list[float] = []

    def add(self, idx: np.ndarray, coeff: np.ndarray, upper: float) -> None:
        """:func:`add_row`'s row (``idx`` ascending, no repeats, not empty), written at the next
        :meth:`flush`."""
        self._idx.append(idx)
        self._coeff.append(coeff)
        self._upper.append(upper)

    def pairs(self, pairs: np.ndarray, coeff: tuple[float, float], upper: float) -> None:
        """:func:`add_pair_rows` after the rows given before."""
        self.flush()
        add_pair_rows(self.model, pairs, coeff, upper)

    def flush(self) -> None:
        """Write the rows given since the last flush, in order: the same bytes as
        :func:`add_row` one by one."""
        idx_list, coeff_list, upper_list = self._idx, self._coeff, self._upper
        if not idx_list:
            return
        self._idx, self._coeff, self._upper = [], [], []
        every = np.concatenate(idx_list)
        if int(every.max()) >= _VARINT_LIMIT:  # not seen: row by row (the API past 3 bytes)
            for idx, coeff, upper in zip(idx_list, coeff_list, upper_list, strict=True):
                add_row(self.model, idx, coeff, upper)
            return
        table, used = _varint_table(every)
        body = table[used].tobytes()
        counts = np.fromiter((len(i) for i in idx_list), dtype=np.int64, count=len(idx_list))
        ends = np.cumsum(counts)
        body_ends = np.cumsum(used.sum(axis=1))[ends - 1].tolist()
        values = np.concatenate(coeff_list).astype("<f8").tobytes()
        uppers = np.asarray(upper_list, dtype="<f8").tobytes()
        out: list[bytes] = []
        at, value_at = 0, 0
        for r, (end, n) in enumerate(zip(body_ends, counts.tolist(), strict=True)):
            head = (
                _LOWER_INF
                + b"\x19"
                + uppers[8 * r : 8 * r + 8]
                + b"\x32"
                + _varint_bytes(end - at)
                + body[at:end]
                + b"\x3a"
                + _varint_bytes(8 * n)
                + values[value_at : value_at + 8 * n]
            )
            out.append(b"\x22" + _varint_bytes(len(head)) + head)
            at, value_at = end, value_at + 8 * n
        self.model.MergeFromString(b"".join(out))
