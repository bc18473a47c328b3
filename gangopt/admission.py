"""Admission to the service's worker pool: bounded, cancellable, drainable.

At most ``workers + queue_limit`` requests hold a slot; the rest are refused at once (429).
A slot is taken only once the request's body has been read (issue 14: with admission before
the body, 18 clients sending a byte every 5 s kept every other request at 429 for as long as
they liked) and is given back when the *work* ends (a pool callback), not when the HTTP
exchange ends, so the count always covers what the pool holds.

Work that has not started yet is cancelled when its client hangs up (18 clients that left
after 0.5 s used to keep the server busy for 56 s) and when the server is told to stop
(:meth:`Admission.drain`): only running work is waited for, so a stop takes at most one
``max_time_limit``, not ``ceil((workers + queue) / workers)`` of them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from prometheus_client import Gauge


class Admission:
    """Slots, the futures holding them, and the draining flag."""

    def __init__(self, workers: int, queue_limit: int, queue_depth: Gauge, running: Gauge) -> None:
        self.workers = workers
        self.capacity = workers + queue_limit
        self._queue_depth = queue_depth
        self._running_gauge = running
        self._lock = threading.Lock()
        self._held = 0
        self._running = 0
        self._mean_seconds = 1.0
        self._futures: set[Future[object]] = set()
        self.draining = False

    def try_acquire(self) -> bool:
        with self._lock:
            if self.draining or self._held >= self.capacity:
                return False
            self._held += 1
            self._publish()
            return True

    def track(self, future: Future[object], started: Callable[[], float | None]) -> None:
        """Hold the slot until ``future`` is done (run, failed or cancelled); ``started`` says
        when a worker took it up (None: it never ran)."""
        with self._lock:
            self._futures.add(future)

        def done(_: Future[object]) -> None:
            with self._lock:
                self._futures.discard(future)
            self.release(started())

        future.add_done_callback(done)

    def started(self) -> None:
        with self._lock:
            self._running += 1
            self._publish()

    def release(self, started_at: float | None) -> None:
        """Give the slot back; ``started_at`` is when a worker took it (None: it never ran)."""
        with self._lock:
            self._held -= 1
            if started_at is not None:
                self._running -= 1
                self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * (time.perf_counter() - started_at)
            self._publish()

    def drain(self) -> int:
        """Stop admitting and cancel every queued job (running ones finish); returns how many
        were cancelled. Safe to call from a signal handler or any thread."""
        with self._lock:
            self.draining = True
            futures = list(self._futures)
        return sum(future.cancel() for future in futures)

    def retry_after(self) -> int:
        """Seconds until the backlog has likely drained: a hint for the Retry-After header."""
        with self._lock:
            return max(1, math.ceil(self._held / self.workers * self._mean_seconds))

    def _publish(self) -> None:
        self._queue_depth.set(self._held - self._running)
        self._running_gauge.set(self._running)
