"""Service-level objectives over a simulation: ``p95_wait<=30m``, ``p100_wait[priority>=2]<=300``.

Grammar (spaces ignored)::

    SLO     := MEASURE [ "[" FILTER "]" ] OP VALUE
    MEASURE := pNN_wait | pNN_jct | mean_wait | mean_jct | max_wait | max_jct
               | unstarted | unfinished | deadline_misses | deadline_miss_rate | preempted_jobs
    FILTER  := (priority | queue) CMP VALUE        CMP := == != >= <= > <
    OP      := <= | < | >= | >
    VALUE   := number with an optional unit: s, m, h, d (times), % (rates)

``pNN`` is any percentile (``p50``, ``p95``, ``p99.9``; ``p100`` = ``max``), computed with
numpy's linear interpolation like :mod:`gangopt.replay.metrics`.

Definitions (the same as :mod:`gangopt.replay.metrics`, so a report and an SLO never disagree):

* **wait** = first start - arrival over every arrived job; a job that never started counts
  with its wait up to the end of the simulation (censored, a lower bound). Leaving it out
  would let a policy meet a wait SLO by starving jobs.
* **jct** = finish - arrival; unfinished jobs count up to the end (censored, same reason).
* **unstarted** / **unfinished**: arrived jobs that never started / did not finish.
* **deadline_misses**: jobs that missed their deadline (:func:`gangopt.replay.metrics.deadline_missed`:
  a start deadline by starting after it, a completion deadline by finishing after it, or not
  at all with the end past it); ``deadline_miss_rate`` divides by the jobs with a deadline.
* **preempted_jobs**: jobs evicted at least once.

A filter that selects no job makes a percentile or mean 0 (the SLO holds vacuously).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gangopt.replay.metrics import deadline_missed
from gangopt.replay.simulation import JobRecord, SimulationResult

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}
_CMPS: dict[str, Callable[[object, object], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,  # type: ignore[dict-item]
    "<=": operator.le,  # type: ignore[dict-item]
    ">": operator.gt,  # type: ignore[dict-item]
    "<": operator.lt,  # type: ignore[dict-item]
}
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "%": 0.01}
_COUNTS = {"unstarted", "unfinished", "deadline_misses", "deadline_miss_rate", "preempted_jobs"}

_SLO_RE = re.compile(
    r"^(?P<measure>[a-z0-9_.]+)(\[(?P<key>priority|queue)(?P<cmp>==|!=|>=|<=|>|<)(?P<fval>[^\]]+)\])?"
    r"(?P<op><=|>=|<|>)(?P<value>[0-9.]+)(?P<unit>[smhd%]?)$"
)
_MEASURE_RE = re.compile(r"^(?:p(?P<q>[0-9]+(?:\.[0-9]+)?)|(?P<agg>mean|max))_(?P<what>wait|jct)$")


@dataclass(frozen=True)
class SLO:
    """One objective; build with :func:`parse_slo`."""

    text: str
    what: str
    """``wait``, ``jct`` or one of the counts (``unstarted`` ...)."""
    stat: str
    """``pNN`` / ``mean`` for wait and jct; ``count`` for counts."""
    quantile: float | None
    op: str
    threshold: float
    filter_key: str | None = None
    filter_op: str | None = None
    filter_value: str | None = None

    def __str__(self) -> str:
        return self.text

    @property
    def label(self) -> str:
        """The measure without the bound, e.g. ``p95_wait[priority>=2]`` (a column name)."""
        return self.text.split(self.op, 1)[0] if self.filter_key is None else self.text[: self.text.index("]") + 1]

    def selects(self, job: JobRecord) -> bool:
        if self.filter_key is None or self.filter_op is None or self.filter_value is None:
            return True
        if self.filter_key == "priority":
            return _CMPS[self.filter_op](job.priority, int(self.filter_value))
        return _CMPS[self.filter_op](job.queue, self.filter_value)

    def met(self, value: float) -> bool:
        return _OPS[self.op](value, self.threshold)

    def measure(self, result: SimulationResult) -> float:
        """The SLO's measured value on ``result`` (seconds for times)."""
        return measure(self, result.jobs, result.end_time)


def parse_slo(text: str) -> SLO:
    """``"p95_wait<=30m"`` -> :class:`SLO`; ``ValueError`` says what is wrong."""
    compact = "".join(text.split())
    match = _SLO_RE.match(compact)
    if match is None:
        raise ValueError(f"cannot read SLO {text!r}; expected e.g. 'p95_wait<=1800' or 'p100_wait[priority>=2]<=5m'")
    measure_name = match["measure"]
    unit = _UNITS[match["unit"]]
    threshold = float(match["value"]) * unit
    filter_key, filter_op, filter_value = match["key"], match["cmp"], match["fval"]
    if filter_key == "priority" and filter_value is not None:
        try:
            int(filter_value)
        except ValueError:
            raise ValueError(f"SLO {text!r}: priority filter needs an integer, got {filter_value!r}") from None
    if filter_key == "queue" and filter_op not in ("==", "!="):
        raise ValueError(f"SLO {text!r}: queue filters use == or !=")
    if measure_name in _COUNTS:
        if measure_name == "deadline_miss_rate" and match["unit"] not in ("", "%"):
            raise ValueError(f"SLO {text!r}: a rate takes a number or a percentage")
        return SLO(compact, measure_name, "count", None, match["op"], threshold, filter_key, filter_op, filter_value)
    m = _MEASURE_RE.match(measure_name)
    if m is None:
        known = "pNN_wait, pNN_jct, mean_wait, mean_jct, max_wait, max_jct, " + ", ".join(sorted(_COUNTS))
        raise ValueError(f"SLO {text!r}: unknown measure {measure_name!r} (known: {known})")
    if match["unit"] == "%":
        raise ValueError(f"SLO {text!r}: a time takes s, m, h or d, not %")
    quantile: float | None
    if m["q"] is not None:
        q = float(m["q"])
        if not 0 <= q <= 100:
            raise ValueError(f"SLO {text!r}: percentile must be within 0..100")
        stat, quantile = f"p{m['q']}", q
    else:
        stat = m["agg"]
        quantile = 100.0 if stat == "max" else None
    return SLO(compact, m["what"], stat, quantile, match["op"], threshold, filter_key, filter_op, filter_value)


def measure(slo: SLO, jobs: Sequence[JobRecord], end: float) -> float:
    """The value of ``slo``'s measure over ``jobs`` of a simulation that ended at ``end``."""
    arrived = [j for j in jobs if j.state != "not_arrived" and slo.selects(j)]
    if slo.what == "unstarted":
        return float(sum(1 for j in arrived if j.first_start is None))
    if slo.what == "unfinished":
        return float(sum(1 for j in arrived if j.state != "finished"))
    if slo.what == "preempted_jobs":
        return float(sum(1 for j in arrived if j.preemptions > 0))
    if slo.what in ("deadline_misses", "deadline_miss_rate"):
        with_deadline = [j for j in arrived if j.deadline is not None]
        misses = sum(1 for j in with_deadline if _missed(j, end))
        if slo.what == "deadline_misses":
            return float(misses)
        return misses / len(with_deadline) if with_deadline else 0.0
    values = [wait(j, end) for j in arrived] if slo.what == "wait" else [jct(j, end) for j in arrived]
    if not values:
        return 0.0
    if slo.quantile is None:
        return float(np.mean(values))
    return float(np.percentile(np.asarray(values, dtype=float), slo.quantile))


def wait(job: JobRecord, end: float) -> float:
    """Queueing delay, censored at ``end`` for jobs that never started."""
    return job.first_start - job.arrival if job.first_start is not None else max(0.0, end - job.arrival)


def jct(job: JobRecord, end: float) -> float:
    """Completion time, censored at ``end`` for unfinished jobs."""
    return job.finish - job.arrival if job.finish is not None else max(0.0, end - job.arrival)


def _missed(job: JobRecord, end: float) -> bool:
    return deadline_missed(job, end)  # one rule for metrics and SLOs, start and completion deadlines


def format_value(slo: SLO, value: float) -> str:
    """A measured value in the SLO's own terms: times as s/m/h, rates as %, counts as integers."""
    if slo.what in ("wait", "jct"):
        if value < 120:
            return f"{value:.0f}s"
        if value < 7200:
            return f"{value / 60:.1f}m"
        return f"{value / 3600:.1f}h"
    if slo.what == "deadline_miss_rate":
        return f"{value:.1%}"
    return f"{value:.0f}"
