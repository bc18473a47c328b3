"""The CP-SAT search in a child process that can be killed (``policy.hard_limit``).

CP-SAT can run far past its own limits on large models (presolve, or-tools #5163), and
memory cannot be capped reliably (#1944): a process that can be killed is the only guarantee
(optimization-notes §3.6). The child is forked, so it inherits the prefiltered round and the
greedy plan without copying them; it sends back a :class:`~gangopt.result.Result`
without the prefiltered round (the parent has its own). Meanwhile the parent finishes the
greedy fallback on the second core (annotated and validated), so a kill costs no time after
the deadline. The child asks the kernel to kill it if the parent dies (``PR_SET_PDEATHSIG``,
:func:`gangopt.beside.die_with_parent`):
a SIGKILLed parent leaves no orphan searching on; and it closes the descriptors it inherited
(a server's sockets) but its answer pipe.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection

from gangopt.annotate import annotate, unchecked_note
from gangopt.beside import close_inherited, die_with_parent
from gangopt.result import Result
from gangopt.schema import Round, Status
from gangopt.validation import same_decisions, validate

HARD_GRACE = 0.25
"""Seconds (plus 5 % of the time limit) the child may run past the limit before it is killed."""

Search = Callable[[], Result]


def search_in_child(rnd: Round, start: float, search: Search, fallback: Result) -> Result:
    """Run ``search`` in a forked child; answer with its result, or with ``fallback`` (the
    greedy plan, finished here meanwhile) if the child overruns the hard limit or dies."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    parent = os.getpid()
    child = context.Process(target=_child_main, args=(search, sender, parent), daemon=True)
    child.start()
    sender.close()
    finished = _finish_fallback(rnd, fallback, start + rnd.policy.time_limit)
    limit = rnd.policy.time_limit
    wait = start + limit * 1.05 + HARD_GRACE - time.perf_counter()
    why = f"CP-SAT did not return within the {limit:g} s limit and was stopped"
    try:
        if receiver.poll(max(0.0, wait)):
            kind, payload = receiver.recv()
            child.join()
            if kind == "result":
                assert isinstance(payload, Result)
                if payload.proven is None and same_decisions(payload.plan, finished.plan):
                    # The search kept the greedy plan (or had no time): the fallback finished
                    # meanwhile is its answer, explained and validated already.
                    plan = finished.plan.model_copy(
                        update={
                            "status": payload.plan.status,
                            "message": unchecked_note(
                                payload.plan.message, finished.plan.waiting, rnd.policy.deterministic
                            ),
                        }
                    )
                    return replace(finished, plan=plan, stats=payload.stats)
                return Result(
                    plan=payload.plan,
                    stats=payload.stats,
                    pre=fallback.pre,
                    score=payload.score,
                    proven=payload.proven,
                    slowdown=fallback.slowdown,
                )
            raise RuntimeError(f"CP-SAT child failed: {payload}")
    except EOFError:
        child.join(timeout=1.0)
        code = child.exitcode
        died = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        why = f"the CP-SAT process died after {time.perf_counter() - start:.1f} s ({died}) without an answer"
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        receiver.close()
    if fallback.plan.solver == "cpsat":  # the warm start is the large-neighbourhood search's plan
        return _with_message(finished, f"{why}; the warm start returned ({fallback.plan.message})")
    return _with_message(finished, f"{why}; greedy plan returned")


def _finish_fallback(rnd: Round, fallback: Result, deadline: float) -> Result:
    """The greedy fallback, annotated (its waiting reasons within ``deadline``) and validated
    ahead of the deadline."""
    plan = annotate(rnd, fallback, deadline=deadline, slowdown=fallback.slowdown or 1.0)
    violations = validate(rnd, plan)
    if violations:
        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        raise RuntimeError(f"internal: greedy plan failed validation: {details}")
    return Result(plan=plan, stats=fallback.stats, pre=fallback.pre, score=fallback.score, finished=True)


def _with_message(result: Result, message: str) -> Result:
    plan = result.plan.model_copy(update={"status": Status.FALLBACK, "message": message})
    return Result(plan=plan, stats=result.stats, pre=result.pre, score=result.score, finished=True)


def _child_main(search: Search, sender: Connection, parent: int) -> None:
    """Entry point of the solving child: send ("result", Result) or ("error", text), then exit."""
    try:
        die_with_parent(parent)
        close_inherited(keep=sender.fileno())
        result = search()
        sender.send(("result", Result(plan=result.plan, stats=result.stats, score=result.score, proven=result.proven)))
    except BaseException as error:
        sender.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        sender.close()
        os._exit(0)  # no atexit handlers or buffered output of the parent's copy


__all__ = ["HARD_GRACE", "search_in_child"]
