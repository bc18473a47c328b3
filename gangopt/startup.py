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
- **pydantic's plugins off** (:func:`prepare`): ``PYDANTIC_DISABLE_PLUGINS=__all__``, pydantic's
  own switch, unless the caller set it (set it empty to have plugins load). pydantic then never
  looks for plugins, so the module that would (``pydantic.plugin._loader``, which imports
  :mod:`importlib.metadata`: email, zipfile, calendar, socket, and reads 86 packages' metadata
  in the bench's environment) is not imported either: :data:`LOADER` is given a stand-in that
  answers "no plugins" and takes anything else from the real module. 0.030 of the 0.23 CPU-s
  of ``import gangopt`` (load 6, 9 runs each, the minimum).
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
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

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


LOADER = "pydantic.plugin._loader"
"""The pydantic module whose ``get_plugins`` every validator pydantic builds asks for plugins."""

PLUGINS_OFF = "__all__"
"""``PYDANTIC_DISABLE_PLUGINS``'s value for "no plugins at all" (pydantic's documentation)."""


def prepare() -> bool:
    """Before gangopt's imports: in the command's process one OpenBLAS thread and no pydantic
    plugins (each unless the caller chose). Returns :func:`started_as_command`, for
    :func:`imported`."""
    command = started_as_command()
    if command:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        if "PYDANTIC_DISABLE_PLUGINS" not in os.environ:
            os.environ["PYDANTIC_DISABLE_PLUGINS"] = PLUGINS_OFF
            sys.modules.setdefault(LOADER, plugins_off())
    return command


def plugins_off() -> types.ModuleType:
    """A stand-in for :data:`LOADER` when plugins are off: its ``get_plugins`` returns none, as
    the real one does then; any other name is the real module's, imported on first use (a
    pydantic release that asks it for more gets it, at the cost it would have paid anyway)."""
    module = types.ModuleType(LOADER, "pydantic's plugin loader with plugins off (gangopt.startup)")
    real: list[types.ModuleType] = []

    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(name: str) -> Any:  # a module's own attribute hook (PEP 562)
        if name.startswith("__"):  # the import system asks for __path__ etc.: a plain module's answer
            raise AttributeError(name)
        if not real:  # importlib's helpers only now: every `import gangopt` imports this module
            import importlib
            import importlib.machinery
            import importlib.util

            package = importlib.import_module("pydantic.plugin")
            spec = importlib.machinery.PathFinder.find_spec(LOADER, package.__path__)
            if spec is None or spec.loader is None:
                raise AttributeError(name)
            loaded = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(loaded)
            real.append(loaded)
        return getattr(real[0], name)

    module.get_plugins = get_plugins  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def imported(command: bool) -> None:
    """After gangopt's imports (still under the raised collector threshold): in the command's
    process, freeze what the imports built, so that no collection walks it."""
    if command:
        gc.freeze()


__all__ = ["COMMAND_NAMES", "LOADER", "PLUGINS_OFF", "imported", "plugins_off", "prepare", "started_as_command"]
