"""Log lines: info to stdout, warnings and errors to stderr, journald priority prefixes
when the stream is the journal, JSON through orjson."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import orjson
import pytest
import structlog

from rofmd.server.logs import configure_logging, journal_stream


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_levels_go_to_their_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        configure_logging("json", "debug", environ={})
        log = structlog.get_logger("t")
        log.debug("d", n=1)
        log.info("i", path=Path("/x"), text="中文")
        log.warning("w")
        log.error("e")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("x")
    finally:
        structlog.reset_defaults()
    assert [orjson.loads(x)["event"] for x in _lines(out)] == ["d", "i"]
    info = orjson.loads(_lines(out)[1])
    assert info["path"] == "/x" and info["text"] == "中文" and info["level"] == "info"
    events = [orjson.loads(x) for x in _lines(err)]
    assert [e["event"] for e in events] == ["w", "e", "x"]
    assert "ValueError: boom" in events[2]["exception"]


def test_journal_streams_get_priority_prefixes(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with path.open("w") as journal, (tmp_path / "other").open("w") as other:
        st = os.fstat(journal.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert journal_stream(journal, env) and not journal_stream(other, env)
        assert not journal_stream(journal, {}) and not journal_stream(
            journal, {"JOURNAL_STREAM": "x"}
        )
        assert not journal_stream(io.StringIO(), env)
        configure_logging("json", "debug", stream=journal, environ=env)
        log = structlog.get_logger("t")
        for method in ("debug", "info", "warning", "error", "critical"):
            getattr(log, method)(method)
        structlog.reset_defaults()
    prefixes = [line[:3] for line in path.read_text().splitlines()]
    assert prefixes == ["<7>", "<6>", "<4>", "<3>", "<2>"]
    assert orjson.loads(path.read_text().splitlines()[3][3:])["event"] == "error"
