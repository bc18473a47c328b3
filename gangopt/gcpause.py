"""Fewer runs of Python's cyclic garbage collector while gangopt builds many objects at once.

The collector runs each time 700 container objects have been allocated and not freed (the
default threshold), and each run walks every young object. Importing gangopt (pydantic
builds its models' validators then) and parsing a round allocate objects by the hundred
thousand, almost none of them in reference cycles, so those runs find nothing to free: they
cost 7 % of the instructions of a whole ``gangopt solve`` of the fragmented S round (1,949
M instructions, 1,804 M with the collector off; valgrind, issue 13) and 0.3 of the 1.4 CPU-s
of parsing the XL round. A raised threshold keeps collecting cycles, a hundred times less
often; the caller's thresholds are restored afterwards, so a library user's process keeps its
own setting.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLD = 70_000
"""Young objects between two collections while paused (the default is 700): 100x fewer runs,
and a young generation of at most a few MB to walk when one runs."""


@contextmanager
def fewer_collections(threshold: int = THRESHOLD) -> Iterator[None]:
    """Collect cycles ``threshold / 700`` times less often inside the block; the thresholds in
    force before are restored on the way out (a caller that set higher ones keeps them)."""
    before = gc.get_threshold()
    if before[0] != 0:  # 0: the caller disabled automatic collection; leave it so
        gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
