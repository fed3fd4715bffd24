"""Metrics counted as plain numbers and exposed as Prometheus text that its own parser
reads back."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from handlers.metrics import LATENCY_BUCKETS, Metrics


def _families(text: str) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for family in text_string_to_metric_families(text):
        rows = out.setdefault(family.name, {})
        for s in family.samples:
            rows[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_requests_latencies_events_and_gauges_parse_back() -> None:
    m = Metrics()
    m.observe_request("ping", "ok", 0.0003)
    m.observe_request("ping", "ok", 0.002)
    m.observe_request("agent/pre-step", "error", 0.2)
    m.observe_request("other", "ok", 0.01)  # names no method answers share one label
    m.observe_request("other", "weird", 0.01)  # an outcome we do not know is an error
    m.count("archives")
    m.count("archived_folders", 12)
    text = m.render(
        [
            ("rofmd_sessions_loaded", "Sessions in memory.", 3, {}),
            ("rofmd_queue_depth", "Requests waiting, by session.", 2, {"session": "a"}),
            ("rofmd_queue_depth", "Requests waiting, by session.", 0, {"session": "b"}),
        ]
    )
    f = _families(text)
    req = f["rofmd_requests"]
    assert req[("rofmd_requests_total", (("method", "ping"), ("outcome", "ok")))] == 2
    assert req[("rofmd_requests_total", (("method", "agent/pre-step"), ("outcome", "error")))] == 1
    assert req[("rofmd_requests_total", (("method", "other"), ("outcome", "ok")))] == 1
    assert req[("rofmd_requests_total", (("method", "other"), ("outcome", "error")))] == 1
    lat = f["rofmd_request_seconds"]
    ping = (("le", "0.0005"), ("method", "ping"))
    assert lat[("rofmd_request_seconds_bucket", ping)] == 1
    assert lat[("rofmd_request_seconds_bucket", (("le", "+Inf"), ("method", "ping")))] == 2
    assert lat[("rofmd_request_seconds_count", (("method", "ping"),))] == 2
    assert lat[("rofmd_request_seconds_sum", (("method", "ping"),))] == pytest.approx(0.0023)
    assert f["rofmd_archives"][("rofmd_archives_total", ())] == 1
    assert f["rofmd_archived_folders"][("rofmd_archived_folders_total", ())] == 12
    assert f["rofmd_recalls"][("rofmd_recalls_total", ())] == 0  # present before it happens
    assert f["rofmd_sessions_loaded"][("rofmd_sessions_loaded", ())] == 3
    assert f["rofmd_queue_depth"][("rofmd_queue_depth", (("session", "a"),))] == 2
    assert len(LATENCY_BUCKETS) + 1 == sum(
        1 for k in lat if k[0] == "rofmd_request_seconds_bucket" and ("method", "ping") in k[1]
    )


def test_an_unknown_event_is_a_bug_not_a_new_series() -> None:
    with pytest.raises(KeyError):
        Metrics().count("archivez")
