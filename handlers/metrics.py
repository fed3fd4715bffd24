"""The daemon's metrics: counted as plain numbers, exposed as Prometheus text.

Counting happens on the hot path (every request, every archive), so it is a dict
increment and a bisect, with no lock and no import: the event loop is one thread. The
exposition (`metrics` request, `rofmd metrics`, the optional metrics endpoint) is built
on demand with `prometheus_client`, imported only then, so a daemon that is never
scraped never pays for it.

Label values are bounded: a method label is one of the protocol's method names (the
dispatcher passes `other` for a name no method answers), so a client sending random
method names cannot grow the exposition without limit.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CONTENT_TYPE", "EVENTS", "LATENCY_BUCKETS", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4"
"""What the exposition is (PROTOCOL.md §4 `metrics`)."""

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
"""Upper bounds (seconds) of the request latency histogram: a ping is sub-millisecond,
an archive of a 128k-token surface a few hundred milliseconds."""

EVENTS: Mapping[str, str] = {
    "archives": "Archives committed by agent/pre-step (each makes one or more folders).",
    "archived_folders": "Memory folders written by archives (active and passive).",
    "passive_archives": "Archives made from other compressors' compactions (passive path).",
    "recalls": "Automatic recall rounds that injected at least one memory.",
    "recalled_memories": "Memories injected by automatic recall.",
    "judged_folders": "Folders whose scores memory_judge changed.",
}
"""The product events counted, with their help texts (names without the prefix)."""

_OUTCOMES = ("ok", "error", "cancelled", "timeout")


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def cumulative(self) -> Iterator[tuple[str, int]]:
        running = 0
        for bound, n in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self.counts, strict=True):
            running += n
            yield bound, running


@dataclass
class Metrics:
    """Counters and latencies of one daemon run."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    latency: dict[str, _Histogram] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    tools: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Tool calls by (tool, ok / error); only served tools' names reach it."""

    def observe_request(self, label: str, outcome: str, seconds: float) -> None:
        """One request answered (``outcome``: ok / error / cancelled / timeout); ``label``
        is its method's name, or `other` for a name no method answers."""
        self.requests[(label, outcome if outcome in _OUTCOMES else "error")] += 1
        hist = self.latency.get(label)
        if hist is None:
            hist = self.latency[label] = _Histogram()
        hist.observe(max(0.0, seconds))

    def snapshot(self) -> Metrics:
        """A copy to render off the event loop while counting goes on."""
        return Metrics(
            Counter(self.requests),
            {k: _Histogram(list(h.counts), h.total) for k, h in self.latency.items()},
            Counter(self.events),
            Counter(self.tools),
        )

    def count_tool(self, tool: str, is_error: bool) -> None:
        """A served tool answered (an isError answer counts as `error`)."""
        self.tools[(tool, "error" if is_error else "ok")] += 1

    def count(self, event: str, n: int = 1) -> None:
        """A product event happened ``n`` times (one of :data:`EVENTS`)."""
        if event not in EVENTS:
            raise KeyError(event)
        self.events[event] += n

    def render(self, gauges: Iterable[tuple[str, str, float, Mapping[str, str]]]) -> str:
        """The Prometheus text exposition: these counters plus ``gauges`` (name, help,
        value, labels), read by the caller at this moment."""
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        metrics = self
        gauge_rows = list(gauges)

        class _Collector:
            def collect(self) -> Iterator[Any]:
                requests = CounterMetricFamily(
                    "rofmd_requests",
                    "Requests answered, by method and outcome.",
                    labels=["method", "outcome"],
                )
                for (method, outcome), n in sorted(metrics.requests.items()):
                    requests.add_metric([method, outcome], n)
                yield requests
                latency = HistogramMetricFamily(
                    "rofmd_request_seconds",
                    "Time from a request's start to its answer, by method.",
                    labels=["method"],
                )
                for method, hist in sorted(metrics.latency.items()):
                    latency.add_metric([method], list(hist.cumulative()), hist.total)
                yield latency
                tools = CounterMetricFamily(
                    "rofmd_tool_calls",
                    "Tool calls answered, by tool and outcome (isError: error).",
                    labels=["tool", "outcome"],
                )
                for (tool, outcome), n in sorted(metrics.tools.items()):
                    tools.add_metric([tool, outcome], n)
                yield tools
                for name, help_text in EVENTS.items():
                    event = CounterMetricFamily(f"rofmd_{name}", help_text)
                    event.add_metric([], metrics.events[name])
                    yield event
                by_name: dict[str, GaugeMetricFamily] = {}
                for name, help_text, value, labels in gauge_rows:
                    gauge = by_name.get(name)
                    if gauge is None:
                        gauge = by_name[name] = GaugeMetricFamily(
                            name, help_text, labels=sorted(labels)
                        )
                    gauge.add_metric([labels[k] for k in sorted(labels)], value)
                yield from by_name.values()

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector())
        return generate_latest(registry).decode()
