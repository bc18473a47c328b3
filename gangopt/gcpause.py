"""Fewer runs of Python's cyclic garbage collector while gangopt builds many objects at once.

The collector runs each time 700 container objects have been allocated and not freed (the
default threshold), and each run walks every young object. Importing gangopt (pydantic
builds its models' validators then), parsing a round and solving it allocate objects by the
hundred thousand, almost none of them in reference cycles, so those runs find nothing to free:
they cost 7 % of the instructions of a whole ``gangopt solve`` of the fragmented S round (1,949
M instructions, 1,804 M with the collector off; valgrind, issue 13) and 0.3 of the 1.4 CPU-s
of parsing the XL round. Worse, the young runs promote the round's millions of objects until
a *full* collection walks them all: a library caller's ``gangopt.solve`` of the fragmented XL
round ran two, 2.5 of its 11.7 CPU-s (2,416 young runs, 0.26 s; load 3-5); inside the block,
none (9.8 CPU-s). A raised threshold keeps collecting cycles, a hundred times less often;
the caller's thresholds are restored afterwards, so a library user's process keeps its own
setting.

The thresholds are the process's, shared by its threads: blocks entered by several threads at
once raise them when the first enters and restore them when the last leaves (a count under a
lock), so that one thread leaving cannot restore the default under another still inside, nor
restore the raised value for good when the two leave in the other order.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLD = 70_000
"""Young objects between two collections while paused (the default is 700): 100x fewer runs,
and a young generation of at most a few MB to walk when one runs."""

_lock = threading.Lock()
_inside = 0
"""Blocks currently open, in every thread (under :data:`_lock`)."""
_before: tuple[int, int, int] = (700, 10, 10)
"""The thresholds in force when the outermost open block was entered."""


@contextmanager
def fewer_collections(threshold: int = THRESHOLD) -> Iterator[None]:
    """Collect cycles ``threshold / 700`` times less often inside the block; the thresholds in
    force before the outermost open block are restored when the last one leaves (a caller
    that set higher ones keeps them; one that disabled automatic collection keeps it off).
    Safe to nest and to enter from several threads at once (module docstring)."""
    global _inside, _before
    with _lock:
        if _inside == 0:
            _before = gc.get_threshold()
        _inside += 1
        current = gc.get_threshold()
        if current[0] != 0 and current[0] < threshold:  # 0: the caller disabled automatic collection
            gc.set_threshold(threshold, *current[1:])
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                gc.set_threshold(*_before)
