"""`session/event` through a real daemon on a real socket (issue 15, reference §3.2.6):
a foreign compaction's shadowed user and assistant messages become passive folders,
the notification is never answered, the same event again archives nothing, rofmd's
own compactions are ignored, and the scope switch limits it to QQ channel sessions."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from tests.e2e.harness import LineSocket, request_line, running_daemon
from tests.passive_fixtures import (
    TOPICS,
    SessionLog,
    archivable_ids,
    passive_messages,
    passive_metas,
)

CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


def _notify(c: LineSocket, method: str, params: dict[str, Any]) -> None:
    c.send(orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n")


def _settle(c: LineSocket, session_id: str, n: int) -> dict[str, Any]:
    """A ping queued behind the session's notifications: its answer is the next line, so
    the notifications were processed and none of them was answered."""
    c.send(request_line(f"ping-{n}", "ping", {"session": {"id": session_id}}))
    answer: dict[str, Any] = c.recv_json()
    assert answer.get("id") == f"ping-{n}", f"a notification was answered: {answer}"
    return answer


def _event(log: SessionLog, summary: dict[str, Any], shadowed: list[int]) -> dict[str, Any]:
    return {"session": {"id": log.session_id}, "event": summary, "shadowed": log.by_seq(shadowed)}


def test_foreign_compaction_archives_the_originals_once() -> None:
    log = SessionLog("web-session-1")
    for text in TOPICS[:4]:
        log.exchange(text)
    span = list(range(log.next_seq))
    summary, _ = log.compaction(span)
    with running_daemon() as d:
        c = LineSocket(d.socket_path)
        init = c.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
        assert "session/event" in init["result"]["listeners"]
        _notify(c, "session/event", _event(log, summary, span))
        _settle(c, log.session_id, 1)
        messages = passive_messages(d.memory_root)
        # user and assistant text only: no tool call, no tool result, no reasoning
        assert {m["id"] for m in messages} == archivable_ids(log.events)
        assert len(messages) == 8
        assert {m["role"] for m in messages} == {"user", "assistant"}
        assert not any("tool-call" in m["content"] or "exit 0" in m["content"] for m in messages)
        assert all(m["time"] == 1_793_610_000_000 + m["seq"] * 1000 for m in messages)
        metas = passive_metas(d.memory_root)
        assert metas and all(m["scored"] is False and m["scoreMode"] == "model" for m in metas)
        assert all(m["eventTimeSource"] == "messages" for m in metas)
        first = min(m["eventStart"] for m in metas)
        assert first == 1_793_610_000_000  # event time, not the archive time
        assert all(m["createdAt"] > m["eventEnd"] for m in metas)
        sdir = d.memory_root / "sessions" / log.session_id
        wm = orjson.loads((sdir / ".passive-watermark.json").read_bytes())
        assert wm["version"] == 2
        assert wm["entries"] == [
            {"sessionId": log.session_id, "seq": span[-1], "ranges": [[0, span[-1]]]}
        ]
        # no checkpoint of our own, no journal left behind
        assert not list(sdir.glob(".commit-*.json"))
        stats = [orjson.loads(x) for x in (sdir / "stats.jsonl").read_bytes().splitlines()]
        [rec] = [r for r in stats if r.get("type") == "compress-applied"]
        assert rec["source"] == "passive" and rec["provider"] == "compact"

        # the same event again (a bridge retry, the tailer, a restart): nothing new
        _notify(c, "session/event", _event(log, summary, span))
        _settle(c, log.session_id, 2)
        assert len(passive_messages(d.memory_root)) == 8

        # our own provider's compaction of later messages: ignored
        log.exchange(TOPICS[4])
        own_span = list(range(span[-1] + 5, log.next_seq))
        own, _ = log.compaction(own_span, provider="dsh-rofm")
        _notify(c, "session/event", _event(log, own, own_span))
        _settle(c, log.session_id, 3)
        assert len(passive_messages(d.memory_root)) == 8

        # a later foreign compaction: only its new originals
        log.exchange(TOPICS[5])
        later = list(range(span[-1] + 1, log.next_seq))
        summary2, _ = log.compaction(later)
        _notify(c, "session/event", _event(log, summary2, later))
        _settle(c, log.session_id, 4)
        seqs = Counter(m["seq"] for m in passive_messages(d.memory_root))
        assert max(seqs.values()) == 1, "a message archived twice"
        assert len(seqs) == 12

        # bad params: no answer either, and nothing breaks
        _notify(c, "session/event", {"session": {"id": "s-bad"}, "event": "nope"})
        _notify(
            c,
            "session/event",
            {"session": {"id": "s-bad"}, "event": {"type": "compaction/summary", "data": {}}},
        )
        _settle(c, "s-bad", 5)
        assert len(passive_messages(d.memory_root)) == 12
        c.close()


def test_channel_scope_and_heuristic_sessions() -> None:
    """`passive_scope: channel` archives QQ channel sessions only (compat active); with
    `scoring.fallback: "always"` the folders are scored at creation, and the recall tool
    finds them: the indexes see passive folders as they see the others."""
    plain, channel = SessionLog("web-session-3"), SessionLog("onebot-123456")
    events = []
    for log in (plain, channel):
        for text in TOPICS:
            log.exchange(text)
        span = list(range(log.next_seq))
        summary, _ = log.compaction(span)
        events.append((log, _event(log, summary, span)))
    with running_daemon(
        env={"ROFMD_PASSIVE_SCOPE": "channel"},
        config={"scoring": {"fallback": "always"}, "compat": {"qqBots": "on"}},
    ) as d:
        c = LineSocket(d.socket_path)
        init = c.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
        assert "session/event" in init["result"]["listeners"]
        for n, (log, params) in enumerate(events):
            _notify(c, "session/event", params)
            _settle(c, log.session_id, n)
        sessions = {p.parent.parent.name for p in d.memory_root.glob("sessions/*/mem-*/meta.json")}
        assert sessions == {"onebot-123456"}
        metas = passive_metas(d.memory_root)
        assert metas and all(m["scored"] is True and m["scoreMode"] == "heuristic" for m in metas)
        assert all(m["alphaSource"] == "heuristic" and m["keywords"] for m in metas)
        answer = c.call(
            2,
            "tools/call",
            {
                "session": {"id": channel.session_id},
                "turn": 1,
                "callId": "r1",
                "name": "memory_recall",
                "arguments": {"keywords": ["PostgreSQL"]},
            },
        )
        text = answer["result"]["content"][0]["text"]
        assert "PostgreSQL" in text, text
        c.close()


def test_scope_off_lists_no_session_event() -> None:
    """Without a daemon: `initialize` lists `session/event` unless the scope is off."""
    from types import SimpleNamespace

    from handlers.listeners import listeners

    assert "session/event" in listeners(SimpleNamespace(passive_scope="all"))  # type: ignore[arg-type]
    assert "session/event" in listeners(SimpleNamespace(passive_scope="channel"))  # type: ignore[arg-type]
    assert "session/event" not in listeners(SimpleNamespace(passive_scope="off"))  # type: ignore[arg-type]
