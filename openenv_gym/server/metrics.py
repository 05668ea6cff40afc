"""GET /metrics: what a server does, in Prometheus' text format, summed over its workers.

    openenv_gym_sessions                    gauge      sessions open (all workers; the session counter's)
    openenv_gym_resets_total                counter    resets started
    openenv_gym_steps_total                 counter    steps started (each entry of a batch counts)
    openenv_gym_step_request_seconds        histogram  from a step request's arrival to its answer; a batch of
                                                       steps (the vector client's) is one request
    openenv_gym_errors_total{code}          counter    errors answered, by the native protocol's code (OpenEnv's
                                                       front end's errors read as those codes)
    openenv_gym_sandboxes                   gauge      episode sandboxes open (in use, or kept warm for the next)
    openenv_gym_model_requests_total{dialect} counter  requests agent programs sent the model endpoint

Each worker counts in plain numbers (an addition per step) and copies them to its row of an array the workers
share: at each housekeeping tick (a few seconds at most), and before it answers a scrape. The worker that answers
sums the rows, so what another worker did shows within a tick. A worker that is restarted starts its row at zero:
Prometheus reads that as a counter reset, as it reads any process restart. The text is written by
prometheus_client, from these numbers (a collector of our own: the workers' sum is ours to make).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, MutableSequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from openenv_gym.errors import ErrorCode

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CODES = tuple(code.value for code in ErrorCode)
DIALECTS = ("chat", "responses", "anthropic", "gemini")
CONTENT_TYPE = CONTENT_TYPE_LATEST

# a worker's row: its counts at these offsets
_RESETS, _STEPS, _SECONDS, _SANDBOXES = range(4)
_BUCKETS = 4  # len(BUCKETS) + 1 counts: each bucket's own, the last above every bound
_CODES = _BUCKETS + len(BUCKETS) + 1
_DIALECTS = _CODES + len(CODES)
WIDTH = _DIALECTS + len(DIALECTS)


def shared_rows(context: Any, workers: int) -> MutableSequence[float]:
    """The array the workers of one server share (a multiprocessing context's, made before they fork)."""
    return context.Array("d", workers * WIDTH, lock=False)


class ServerMetrics:
    """One worker's counts; `text()` answers a scrape with every worker's summed."""

    __slots__ = ("buckets", "codes", "dialects", "index", "resets", "rows", "sandboxes", "seconds", "sessions",
                 "steps")

    def __init__(self, rows: MutableSequence[float] | None = None, index: int = 0) -> None:
        self.rows = rows if rows is not None else [0.0] * WIDTH
        self.index = index
        self.resets = self.steps = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.codes = dict.fromkeys(CODES, 0)
        self.dialects = dict.fromkeys(DIALECTS, 0)
        self.sessions: Any = lambda: 0  # the open sessions of every worker (the session counter's total)
        self.sandboxes: Any = lambda: 0  # this worker's live sandboxes

    def step_answered(self, seconds: float) -> None:
        self.seconds += seconds
        self.buckets[bisect_left(BUCKETS, seconds)] += 1

    def error(self, code: str) -> None:
        if code in self.codes:
            self.codes[code] += 1

    def errors_in(self, answer: dict) -> None:
        """Count the errors of a native answer: its `error`, one object or a column of them (null: no error)."""
        error = answer["error"]
        for entry in error if type(error) is list else (error,):
            if type(entry) is dict:
                self.error(entry.get("code"))

    def model_request(self, dialect: str) -> None:
        if dialect in self.dialects:
            self.dialects[dialect] += 1

    def publish(self) -> None:
        """Copy this worker's counts to its row of the shared array."""
        row = [float(self.resets), float(self.steps), self.seconds, float(self.sandboxes()), *map(float, self.buckets),
               *map(float, self.codes.values()), *map(float, self.dialects.values())]
        start = self.index * WIDTH
        self.rows[start:start + WIDTH] = row

    def text(self) -> str:
        """Every worker's counts, summed, in Prometheus' text format."""
        self.publish()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Summed(self))
        return generate_latest(registry).decode()


class _Summed(Collector):
    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        rows = list(self.metrics.rows)
        total = [sum(rows[start::WIDTH]) for start in range(WIDTH)]
        yield GaugeMetricFamily("openenv_gym_sessions", "Sessions open.", value=self.metrics.sessions())
        yield CounterMetricFamily("openenv_gym_resets", "Resets started.", value=total[_RESETS])
        yield CounterMetricFamily("openenv_gym_steps", "Steps started (each entry of a batch counts).",
                                  value=total[_STEPS])
        counts = total[_BUCKETS:_BUCKETS + len(BUCKETS) + 1]
        cumulative, running = [], 0.0
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), counts, strict=True):
            running += count
            cumulative.append((bound, running))
        yield HistogramMetricFamily("openenv_gym_step_request_seconds",
                                    "Seconds from a step request's arrival to its answer (a batch is one request).",
                                    buckets=cumulative, sum_value=total[_SECONDS])
        errors = CounterMetricFamily("openenv_gym_errors", "Errors answered, by code.", labels=["code"])
        for code, count in zip(CODES, total[_CODES:_DIALECTS], strict=True):
            errors.add_metric([code], count)
        yield errors
        yield GaugeMetricFamily("openenv_gym_sandboxes", "Episode sandboxes open (in use, or kept warm).",
                                value=total[_SANDBOXES])
        requests = CounterMetricFamily("openenv_gym_model_requests",
                                       "Requests agent programs sent the model endpoint, by API dialect.",
                                       labels=["dialect"])
        for dialect, count in zip(DIALECTS, total[_DIALECTS:], strict=True):
            requests.add_metric([dialect], count)
        yield requests
