"""What the ``gangopt`` command's own process settles before gangopt's imports, and a program
that imports gangopt as a library does not have done for it (issue 13: fixed costs).

Two things belong to the process, not to the library, so they happen only when the
interpreter was started as the command, the ``gangopt`` script or ``python -m gangopt``
(:func:`started_as_command`, decided from the command line before anything heavy is imported):

- **One OpenBLAS thread** (:func:`prepare`). gangopt makes no BLAS call (its numpy work is
  element-wise), yet importing numpy starts OpenBLAS's thread pool, one thread per core, whose
  threads spin waiting for work after they start: 0.045 of the 0.125 CPU-s of ``import numpy``
  on the 2-core bench machine, paid by every ``gangopt`` command. ``OPENBLAS_NUM_THREADS`` is
  set only if the caller has not set it, and the command's child processes (the replays'
  workers, no BLAS either) inherit it.
- **The imports frozen** (:func:`imported`, :func:`gc.freeze`): importing gangopt builds about
  70,000 tracked objects (modules, classes, functions, pydantic's validators) that live as long
  as the process, under :mod:`gangopt.gcpause`'s raised threshold; when the default is restored
  the first young collection walked all of them and freed 496: 10 ms of the 0.19 CPU-s import.
  Frozen, no collection walks them. A library caller's process keeps its own objects
  collectable: freezing there would also freeze everything it built before importing gangopt.
"""

from __future__ import annotations

import gc
import os
import sys

COMMAND_NAMES = frozenset({"gangopt", "gangopt-script.py", "gangopt.exe"})
"""What the installed ``gangopt`` script is called (``sys.argv[0]``'s last part)."""


def started_as_command() -> bool:
    """Whether this interpreter was started to run the ``gangopt`` command: the script (its
    path is ``sys.argv[0]``) or ``python [options] -m gangopt`` (while a ``-m`` package is
    imported ``sys.argv[0]`` is ``"-m"``; ``sys.orig_argv`` says which package). A program
    importing gangopt (``python -c``, pytest, the service's host) is not."""
    if not sys.argv:
        return False
    if sys.argv[0] == "-m":  # the interpreter's options end at the first -m: what follows is the package's
        for i, arg in enumerate(sys.orig_argv):
            if arg.startswith("-m"):
                return (arg[2:] or "".join(sys.orig_argv[i + 1 : i + 2])) == "gangopt"
        return False
    return os.path.basename(sys.argv[0]) in COMMAND_NAMES


def prepare() -> bool:
    """Before gangopt's imports: in the command's process one OpenBLAS thread (unless the
    caller chose a number). Returns :func:`started_as_command`, for :func:`imported`."""
    command = started_as_command()
    if command:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    return command


def imported(command: bool) -> None:
    """After gangopt's imports (still under the raised collector threshold): in the command's
    process, freeze what the imports built, so that no collection walks it."""
    if command:
        gc.freeze()


__all__ = ["COMMAND_NAMES", "imported", "prepare", "started_as_command"]
