"""Work beside the solve: a forked child on the second core, for work the solve does not wait on.

The door (:mod:`gangopt.solve`) validates every plan, and before this module it did so after
the finisher (:mod:`gangopt.annotate`), on the one core the solve used, although the finisher
changes none of what the validator's checks of the decisions read. :func:`beside` forks a child
that runs such work (:func:`gangopt.validation.validate_decisions`) while the parent goes on (the
finisher), and :meth:`Beside.result` collects the answer. The child is a plain ``os.fork``: it
inherits the round and the plan without copying them, and costs no import of
:mod:`multiprocessing` (whose modules cost 2 % of the S round's CLI solve, issue 13).

It runs only where it can pay (:func:`second_core`): a second CPU in the process's affinity
that no other process runs on now, one thread in the process (the service runs its solves in
threads, and a fork copies only the calling one), and ``os.fork``. Otherwise the caller runs
the same work in-process, so the answer is the same either way. A child that fails or dies
answers None (the caller then does the work itself), and :meth:`Beside.result` and
:meth:`Beside.close` reap it, so its CPU time counts in ``RUSAGE_CHILDREN``
(:func:`gangopt.solve.cpu_seconds`).

The child asks the kernel to kill it if the parent dies (:func:`die_with_parent`), and closes
the descriptors it inherited but its answer pipe (:func:`close_inherited`), as the CP-SAT
search's child does (:mod:`gangopt.solvers.cpsat.child`).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def second_core() -> bool:
    """Whether a forked child can run beside this process on a CPU of its own: the process may
    run on two CPUs or more, no other process runs on the second one now (:func:`others_running`),
    it has one thread, and it can fork.

    A CPU in the affinity is not a free one: on the shared 2-core host with two other jobs
    running, the finisher of the fragmented L round took 0.69 s of wall time beside the child
    (0.49 CPU-s) against 0.44 s without it, plus 0.16 s of validation: the child took its share
    of the cores from the parent (docs/benchmarks.md, "h33-beside")."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "fork"):
        return False
    cpus = len(os.sched_getaffinity(0))
    return cpus >= 2 and threading.active_count() == 1 and others_running() <= cpus - 2


def others_running() -> int:
    """Processes other than this one the kernel has running or ready to run now (Linux's
    ``/proc/loadavg``, its fourth field); elsewhere the 1-minute load average less this one."""
    try:
        with open("/proc/loadavg", encoding="ascii") as stat:
            return max(0, int(stat.read().split()[3].split("/")[0]) - 1)
    except (OSError, IndexError, ValueError):
        return max(0, round(os.getloadavg()[0]) - 1) if hasattr(os, "getloadavg") else 0


class Beside(Generic[T]):
    """A forked child computing one answer; :meth:`result` waits for it."""

    def __init__(self, pid: int, answer: int) -> None:
        self.pid = pid
        self._answer = answer
        self.reaped = False

    def result(self, timeout: float | None = None) -> T | None:
        """The child's answer, once it has ended (reaped: its CPU time is then counted); None
        if it failed or died without one, or gave none within ``timeout`` seconds (then it is
        killed: a child stuck for good must not hold the solve)."""
        chunks = []
        end = None if timeout is None else time.perf_counter() + timeout
        try:
            while end is None or select.select([self._answer], [], [], max(0.0, end - time.perf_counter()))[0]:
                chunk = os.read(self._answer, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            else:
                self._reap(kill=True)
                return None
        except OSError:
            chunks = []
        self._reap(kill=False)
        try:
            kind, payload = pickle.loads(b"".join(chunks))
        except Exception:  # died before its answer was whole: no answer
            return None
        return payload if kind == "result" else None

    def ready(self) -> bool:
        """Whether the child has answered (or ended): :meth:`result` would not wait."""
        return not self.reaped and bool(select.select([self._answer], [], [], 0)[0])

    def cpu_seconds(self) -> float | None:
        """CPU seconds the child has used so far (Linux's ``/proc/PID/stat``); None where that
        cannot be read (another system, or the child reaped)."""
        if self.reaped:
            return None
        try:
            with open(f"/proc/{self.pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        """End the child if it still runs, and reap it (for a parent that will not ask for the
        answer: an exception on its way; idempotent)."""
        self._reap(kill=True)

    def _reap(self, kill: bool) -> None:
        if self.reaped:
            return
        self.reaped = True
        os.close(self._answer)
        try:
            if kill:
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ChildProcessError, ProcessLookupError):  # reaped by a SIGCHLD handler of the caller's
            pass


def beside(work: Callable[[], T], niceness: int = 0) -> Beside[T] | None:
    """``work()`` in a forked child, started now; None where a child cannot run beside this
    process (:func:`second_core`): the caller then runs ``work`` itself.

    ``niceness`` > 0: the child runs at that lower priority (:func:`os.nice`), for work this
    process can do without: should other processes take the second core after the fork, the
    kernel gives the child at nice 19 about 1.5 % of a core it shares with a process at nice 0
    (weights 15 and 1024), and this process keeps its own."""
    if not second_core():
        return None
    parent = os.getpid()
    answer, sender = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        _child_main(work, answer, sender, parent, niceness)
    os.close(sender)
    return Beside(pid, answer)


def _child_main(work: Callable[[], object], answer: int, sender: int, parent: int, niceness: int = 0) -> None:
    """Entry point of the child: write ("result", answer) or ("error", text), then exit."""
    try:
        os.close(answer)
        die_with_parent(parent)
        close_inherited(keep=sender)
        if niceness > 0:
            os.nice(niceness)
        data = pickle.dumps(("result", work()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as error:
        data = pickle.dumps(("error", f"{type(error).__name__}: {error}"))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(sender, view) :]
    finally:
        os._exit(0)  # no atexit handlers or buffered output of the parent's copy


PR_SET_PDEATHSIG = 1


def close_inherited(keep: int) -> None:
    """Close every descriptor the fork inherited except stdio and ``keep`` (the answer pipe).

    In the service, the child would otherwise hold the server's sockets: a connection the
    server closed sent no FIN until the search ended (issue 14's disconnect tests found it)."""
    top = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024
    os.closerange(3, keep)
    os.closerange(keep + 1, max(keep + 1, top))


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux); elsewhere nothing.
    The parent may already be gone by the time this runs: then exit at once."""
    if sys.platform.startswith("linux"):
        import ctypes  # the child's only: no import in the parent

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


__all__ = ["Beside", "beside", "close_inherited", "die_with_parent", "others_running", "second_core"]
