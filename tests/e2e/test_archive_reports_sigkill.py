"""`archive/commit` and `archive/abort` re-sent after a SIGKILL get the answer the first
one got or would have got (issue 21), against a real daemon on a real socket.

Each trial archives a big surface (dozens of folders), SIGKILLs the daemon at one point
of the archive's life (before the report, after its answer, in the middle of the
commit, of the abort, of the pre-step itself), restarts it on the same memory root and
re-sends the report, then again after one more SIGKILL. What the kill interrupted is
read from the durable record on disk before the restart, so every trial knows which
answer it must get; the kill delays are bisected until the kill lands in the middle of
the work. After every trial the folders on disk are exactly the archive's (kept) or
none of them (rolled back), index.json matches them, and every message of the host is
in exactly one folder or still on its surface.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from handlers.archive_state import RECORD_NAME
from tests.archive_fixtures import Surface
from tests.e2e.harness import request_line
from tests.e2e.test_archive_prestep import conversation, params
from tests.e2e.test_archive_replay import (
    Daemons,
    call,
    check_messages,
    connect,
    daemons,
    index_matches_disk,
    result,
    unreported,
)

TURNS = 60
"""A surface whose archive writes dozens of folders: the kill windows are wide."""
HUNT = 14
"""Bisection steps allowed to land a kill in the middle of the work."""


def _record_state(base: Path, token: str) -> str | None:
    """The token's phase (unreported) or outcome (settled) in the record on disk."""
    path = base / RECORD_NAME
    if not path.exists():
        return None
    doc = orjson.loads(path.read_bytes())
    for r in doc["unreported"]:
        if r["token"] == token:
            return str(r["phase"])
    for r in doc["settled"]:
        if r["token"] == token:
            return str(r["outcome"])
    return None


STOPPED = -1.0
"""A delay that kills before the daemon reads the request: it is stopped (SIGSTOP)
before the request is sent, so the kill lands before any of its work, however fast."""


def _send_then_kill(d: Daemons, method: str, p: dict[str, Any], delay: float | None) -> None:
    """Send the request, SIGKILL the daemon ``delay`` seconds later (None: once the
    answer is written; :data:`STOPPED`: before it reads it); the answer is never used
    (the host lost it)."""
    c = connect(d)
    try:
        if delay == STOPPED:
            assert d.pid is not None
            os.kill(d.pid, signal.SIGSTOP)
        c.send(request_line(1, method, p))
        if delay is None:
            assert "result" in c.recv_json()
        elif delay > 0:
            time.sleep(delay)
        d.kill()
    finally:
        c.close()


def _report(d: Daemons, method: str, sid: str, token: str) -> dict[str, Any]:
    return call(d, method, {"session": {"id": sid}, "token": token})


def _refusal(answer: dict[str, Any]) -> str:
    """The settled outcome a -32602 refusal names."""
    assert "error" in answer, answer
    err = answer["error"]
    assert err["code"] == -32602, err
    return str(err["data"]["outcome"])


def _exactly_once(d: Daemons, sid: str, s: Surface, archived: list[str], span: list[int]) -> None:
    """The folders on disk are ``archived``; every message is in one of them (once) or on
    the surface (the span the host replaced is not)."""
    base = d.session_dir(sid)
    assert {f.name for f in base.glob("mem-*")} == set(archived)
    assert index_matches_disk(base) and not list(base.glob(".commit-*"))
    ids = [str(n["message"]["id"]) for n in s.nodes]
    gone = {str(n["message"]["id"]) for n in s.nodes if n["seq"] in span}
    tally = check_messages(base, ids, set(ids) - gone, final=True)
    assert tally.problems == [], tally.problems[:10]


def _hunt(
    trial: Callable[[float | None], str], hi: float, middle: str, steps: int = HUNT
) -> Counter[str]:
    """Run ``trial(delay)`` at once, after the answer, then with delays bisected in
    between until one kill lands in ``middle``; returns where the kills landed."""
    seen: Counter[str] = Counter()
    first = trial(0.0)
    seen.update((first, trial(None)))
    lo = 0.0
    for _ in range(steps):
        if seen[middle]:
            break
        delay = (lo + hi) / 2
        state = trial(delay)
        seen[state] += 1
        if state == first:
            lo = delay
            if lo > hi * 0.9:  # slower than calibrated: look later
                hi *= 2
        elif state != middle:
            hi = delay
    return seen


def _timed(d: Daemons, method: str, p: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    answer = call(d, method, p)
    return answer, time.monotonic() - t0


def test_commit_resent_after_sigkill_before_during_and_after_it() -> None:
    s = conversation(TURNS, 500)
    with daemons() as d:
        # before the commit: the host's commit reaches a restarted daemon
        sid = "commit-0"
        comp = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
        assert len(comp["folders"]) > 20
        token = comp["token"]
        d.restart()
        answer, took = _timed(d, "archive/commit", {"session": {"id": sid}, "token": token})
        assert result(answer) == {"ok": True}
        # after the commit was answered: its answer lost, re-sent after a restart, twice
        for _ in range(2):
            d.restart()
            assert result(_report(d, "archive/commit", sid, token)) == {"ok": True}
            assert _refusal(_report(d, "archive/abort", sid, token)) == "committed"
            _exactly_once(d, sid, s, comp["folders"], comp["shadowedSeqs"])
        assert unreported(d.session_dir(sid)) == []

        # during the commit: whatever the kill interrupted, the re-sent commit succeeds
        n = 0

        def trial(delay: float | None) -> str:
            nonlocal n
            n += 1
            sid = f"commit-{n}"
            comp = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
            token = comp["token"]
            base = d.session_dir(sid)
            _send_then_kill(d, "archive/commit", {"session": {"id": sid}, "token": token}, delay)
            journal = (base / f".commit-{token}.json").exists()
            state = _record_state(base, token)
            where = {
                (True, "answered"): "before",
                (False, "answered"): "middle",
                (False, "committed"): "after",
            }[(journal, str(state))]
            d.start()
            for _ in range(2):
                assert result(_report(d, "archive/commit", sid, token)) == {"ok": True}, where
                _exactly_once(d, sid, s, comp["folders"], comp["shadowedSeqs"])
                d.restart()
            assert _refusal(_report(d, "archive/abort", sid, token)) == "committed"
            return where

        # a commit is a journal unlink and a record write: its middle is narrow, so
        # landing there is tried, not required (the in-process test covers every step)
        seen = _hunt(trial, took * 1.5, "middle", steps=6)
        if not seen["before"]:  # a commit can be past its journal before a kill at 0 lands
            seen[trial(STOPPED)] += 1
        print("commit kills:", dict(seen))
        assert seen["before"] and seen["after"], seen


def test_abort_resent_after_sigkill_before_during_and_after_it() -> None:
    s = conversation(TURNS, 500)
    with daemons() as d:
        sid = "abort-cal"
        comp = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
        _, took = _timed(d, "archive/abort", {"session": {"id": sid}, "token": comp["token"]})
        n = 0

        def trial(delay: float | None) -> str:
            nonlocal n
            n += 1
            sid = f"abort-{n}"
            comp = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
            assert len(comp["folders"]) > 20
            token = comp["token"]
            base = d.session_dir(sid)
            p = {"session": {"id": sid}, "token": token, "reason": "host refused"}
            _send_then_kill(d, "archive/abort", p, delay)
            left = {f.name for f in base.glob("mem-*")}
            where = {"answered": "before", "aborting": "middle", "aborted": "after"}[
                str(_record_state(base, token))
            ]
            if where == "before":
                assert left == set(comp["folders"])  # nothing removed before the record
            d.start()
            first = {"ok": True, "rolledBack": comp["folders"]}
            # begun before the kill: finished at load, and the answer says so
            want = first if where == "before" else {**first, "alreadyRolledBack": True}
            assert result(_report(d, "archive/abort", sid, token)) == want, where
            for _ in range(2):
                _exactly_once(d, sid, s, [], [])  # nothing of it left, nothing lost
                assert not list(base.glob("images/img-*")) and unreported(base) == []
                assert _refusal(_report(d, "archive/commit", sid, token)) == "aborted"
                d.restart()
                again = result(_report(d, "archive/abort", sid, token))
                assert again == {**first, "alreadyRolledBack": True}, where
            # the host's context is unchanged: the same pre-step archives afresh, once
            fresh = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
            # a new token; folder ids of the rolled-back archive may be issued again (they
            # are time-based and nothing of them is left), so only the disk decides
            assert fresh["token"] != token
            assert result(_report(d, "archive/commit", sid, fresh["token"])) == {"ok": True}
            _exactly_once(d, sid, s, fresh["folders"], fresh["shadowedSeqs"])
            return where

        seen = _hunt(trial, took * 1.5, "middle")
        if not seen["before"]:  # the same, for a fast abort
            seen[trial(STOPPED)] += 1
        print("abort kills:", dict(seen))
        assert seen["before"] and seen["middle"] and seen["after"], seen


def test_prestep_killed_before_its_answer_then_reports_of_its_token() -> None:
    """The daemon dies while the pre-step writes its folders: the record says ``planned``,
    the answer never left, the archive is rolled back at load. A report naming that
    token (the host cannot hold it, but say it does) is answered as for an archive that
    is not kept: commit refused (``unanswered``), abort already rolled back."""
    s = conversation(TURNS, 500)
    with daemons() as d:
        _, took = _timed(d, "agent/pre-step", params(s, "pre-cal", percent=90))
        n = 0

        def trial(delay: float | None) -> str:
            nonlocal n
            n += 1
            sid = f"pre-{n}"
            base = d.session_dir(sid)
            _send_then_kill(d, "agent/pre-step", params(s, sid, percent=90), delay)
            entries = unreported(base)
            where = {(): "before", ("planned",): "middle", ("answered",): "after"}[
                tuple(e["phase"] for e in entries)
            ]
            d.start()
            if where == "middle":
                token, written = entries[0]["token"], entries[0]["journal"]["folders"]
                for _ in range(2):
                    assert _refusal(_report(d, "archive/commit", sid, token)) == "unanswered"
                    aborted = result(_report(d, "archive/abort", sid, token))
                    assert aborted == {
                        "ok": True,
                        "rolledBack": written,
                        "alreadyRolledBack": True,
                    }
                    _exactly_once(d, sid, s, [], [])
                    d.restart()
            comp = result(call(d, "agent/pre-step", params(s, sid, percent=90)))["compaction"]
            if where == "middle":
                assert comp["token"] != token  # the disk check below decides the rest
            if where == "after":
                assert comp["token"] == entries[0]["token"]  # the lost answer, again
            for _ in range(2):
                assert result(_report(d, "archive/commit", sid, comp["token"])) == {"ok": True}
                _exactly_once(d, sid, s, comp["folders"], comp["shadowedSeqs"])
                d.restart()
            return where

        seen = _hunt(trial, took * 1.5, "middle")
        print("pre-step kills:", dict(seen))
        assert seen["middle"], seen


def test_unknown_token_is_refused_before_and_after_a_restart() -> None:
    s = conversation(30, 300)
    with daemons() as d:
        comp = result(call(d, "agent/pre-step", params(s, "unk", percent=90)))["compaction"]
        for _ in range(2):
            for method in ("archive/commit", "archive/abort"):
                err = _report(d, method, "unk", comp["token"] + "-x")["error"]
                assert err["code"] == -32602 and err["message"] == "unknown archive token"
                assert "outcome" not in err["data"]
                assert err["data"]["errors"][0]["field"] == "token"
            d.restart()
        assert result(_report(d, "archive/commit", "unk", comp["token"])) == {"ok": True}
