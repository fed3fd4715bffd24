"""The passive archive against a real store (reference §3.2.6): what it keeps, that it
never archives twice (watermark, a crash before the watermark, a damaged watermark, an
active archive of the same messages), and that a refused write is retried, not lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from engine.config.model import MemoryConfig
from engine.passive import WATERMARK_NAME, PassiveInput, archive_passive, compaction_of
from engine.store import FolderMeta, SessionStore, make_idempotency_key, open_session
from tests.passive_fixtures import TOPICS, SessionLog, archivable_ids

NOW = 1_793_700_000_000
CFG = MemoryConfig.defaults()


def _store(tmp_path: Path, sid: str = "web-1") -> SessionStore:
    return open_session(tmp_path / "memory", sid)


def _input(log: SessionLog, summary: dict[str, Any], seqs: list[int], **kw: Any) -> PassiveInput:
    values: dict[str, Any] = {
        "session_id": log.session_id,
        "event": summary,
        "shadowed": log.by_seq(seqs),
        "now_ms": NOW,
        "cfg": CFG,
        "archiver_version": "rofmd-test",
    }
    values.update(kw)
    return PassiveInput(**values)


def _messages(store: SessionStore) -> list[dict[str, Any]]:
    return [m for e in store.index for m in store.read_context(e.id)]


def _conversation(
    sid: str = "web-1", turns: int = 3
) -> tuple[SessionLog, dict[str, Any], list[int]]:
    log = SessionLog(sid)
    for text in TOPICS[:turns]:
        log.exchange(text)
    span = list(range(log.next_seq))
    summary, _ = log.compaction(span)
    return log, summary, span


def test_user_and_assistant_text_become_pending_passive_folders(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, summary, span = _conversation()
    out = archive_passive(store, _input(log, summary, span))
    assert out.outcome == "archived" and out.written and out.messages == 6
    messages = _messages(store)
    assert {m["id"] for m in messages} == archivable_ids(log.events)
    assert all(m["role"] in ("user", "assistant") for m in messages)
    assert not any("tool-call" in m["content"] or "thinking" in m["content"] for m in messages)
    metas = [store.get_meta(e.id) for e in store.index]
    for meta in metas:
        assert meta.archivedFrom == "passive" and meta.scored is False
        assert meta.scoreMode == "model" and meta.alphaSource == "pending"
        assert meta.eventTimeSource == "messages" and meta.eventStart is not None
    assert min(m.eventStart or 0 for m in metas) == log.events[0]["time"]
    assert not store.committed_transactions()  # finalized: no checkpoint to wait for
    wm = orjson.loads((store.dir / WATERMARK_NAME).read_bytes())
    assert wm["entries"] == [{"sessionId": "web-1", "seq": span[-1], "ranges": [[0, span[-1]]]}]


def test_the_same_event_archives_nothing_twice(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, summary, span = _conversation()
    first = archive_passive(store, _input(log, summary, span))
    again = archive_passive(store, _input(log, summary, span))
    assert again.outcome == "nothing-new" and again.already_handled == len(span)
    # a crash after the folders, before the watermark: the replay keys the same folders
    (store.dir / WATERMARK_NAME).unlink()
    replay = archive_passive(store, _input(log, summary, span))
    assert replay.outcome == "archived" and replay.written == []
    assert replay.folder_ids == first.folder_ids
    # a damaged watermark: the same
    (store.dir / WATERMARK_NAME).write_bytes(b"{not json")
    damaged = archive_passive(store, _input(log, summary, span))
    assert damaged.written == [] and damaged.warnings[0][0] == "watermark-damaged"
    assert len(_messages(store)) == 6
    # after a restart (the store opened again): still nothing new
    reopened = open_session(tmp_path / "memory", "web-1")
    assert archive_passive(reopened, _input(log, summary, span)).outcome == "nothing-new"


def test_own_provider_other_events_and_empty_spans(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, _, span = _conversation()
    own, _ = log.compaction(span, provider="dsh-rofm")
    assert archive_passive(store, _input(log, own, span)).outcome == "own-provider"
    assert archive_passive(store, _input(log, log.events[0], span)).outcome == "not-a-compaction"
    tool_only = [e["seq"] for e in log.events if e["type"] == "tool/result"]
    summary, _ = log.compaction(tool_only)
    out = archive_passive(store, _input(log, summary, tool_only))
    assert out.outcome == "no-messages" and len(store) == 0
    # handled all the same: the tool results are never looked at again
    assert archive_passive(store, _input(log, summary, tool_only)).outcome == "nothing-new"


def test_shadowed_seqs_runs_and_the_range_fallback() -> None:
    event = {"type": "compaction/summary", "data": {"shadowedSeqs": [1, [3, 5], 9]}}
    c = compaction_of(event)
    assert c is not None and c.seqs == (1, 3, 4, 5, 9)
    event = {"type": "compaction/summary", "data": {"shadowedRange": {"start": 2, "end": 4}}}
    c = compaction_of(event)
    assert c is not None and c.seqs == (2, 3, 4) and not c.own
    huge = {"type": "compaction/summary", "data": {"shadowedRange": {"start": 0, "end": 2**53}}}
    c = compaction_of(huge)
    assert c is not None and len(c.seqs) == 100_000


def _active_folder(store: SessionStore, message: dict[str, Any], time: int) -> None:
    """One folder a pre-step wrote (``archivedFrom: "adapter"``) holding ``message``."""
    meta = FolderMeta.model_validate(
        {
            "id": store.new_folder_id(NOW),
            "createdAt": NOW,
            "scored": False,
            "title": "t",
            "archivedFrom": "adapter",
            "eventStart": time,
            "eventEnd": time + 1,
            "idempotencyKey": make_idempotency_key("web-1", 1, 0, 0, "h", 0),
        }
    )
    with store.transaction("arc-active") as txn:
        txn.add_folder(meta, [message])
    store.finalize("arc-active")


def test_messages_an_active_archive_holds_are_not_archived_again(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, summary, span = _conversation()
    held = log.events[0]  # the first user message, archived by a pre-step kept on a maybe
    _active_folder(
        store, {"role": "user", "content": "x", "seq": 0, "id": held["data"]["id"]}, held["time"]
    )
    out = archive_passive(store, _input(log, summary, span))
    assert out.outcome == "archived" and out.already_archived == 1
    ids = [m["id"] for m in _messages(store)]
    assert ids.count(held["data"]["id"]) == 1 and len(ids) == 6


def test_a_refused_write_leaves_the_event_to_be_tried_again(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _active_folder(store, {"role": "user", "content": "x", "seq": 99, "id": "other"}, NOW)
    log, summary, span = _conversation()
    capped = CFG.model_copy(update={"storage": CFG.storage.model_copy(update={"max_folders": 1})})
    out = archive_passive(store, _input(log, summary, span, cfg=capped))
    assert out.outcome == "failed" and len(store) == 1  # storage.maxFolders refused it
    assert not (store.dir / WATERMARK_NAME).exists()
    retry = archive_passive(store, _input(log, summary, span))
    assert retry.outcome == "archived" and len(_messages(store)) == 7


def test_heuristic_sessions_are_scored_at_creation(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, summary, span = _conversation(turns=6)
    out = archive_passive(store, _input(log, summary, span, score_mode="heuristic"))
    assert out.outcome == "archived"
    for entry in store.index:
        meta = store.get_meta(entry.id)
        assert meta.scored is True and meta.scoreMode == "heuristic" and meta.keywords
        assert meta.alphaSource == "heuristic" and meta.archivedFrom == "passive"


def test_secrets_are_redacted_on_the_passive_path_too(tmp_path: Path) -> None:
    """The archive text entry point (``engine.archive.messages``) is shared: a token in
    a foreign compaction's originals never reaches a folder."""
    store = _store(tmp_path)
    log = SessionLog("web-1")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    log.exchange(f"部署用的 GitHub token 是 {token},别外传。")
    span = list(range(log.next_seq))
    summary, _ = log.compaction(span)
    assert archive_passive(store, _input(log, summary, span)).outcome == "archived"
    stored = b"".join(p.read_bytes() for p in store.dir.rglob("*.json"))
    assert token.encode() not in stored
