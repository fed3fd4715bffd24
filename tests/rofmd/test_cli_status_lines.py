"""`rofmd status` without --json shows what needs attention: config warnings and
telemetry failures (the daemon's answer is canned here; the e2e tests ask a real one)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from rofmd.cli import main as cli


def _status(monkeypatch: pytest.MonkeyPatch, result: dict[str, Any]) -> None:
    monkeypatch.setattr(cli, "_client_call", lambda args, method: (0, result))


def test_warnings_and_stats_errors_are_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _status(
        monkeypatch,
        {
            "version": "1",
            "config": {"generation": 2, "warnings": ["recall.limit: 99 is above 20; using 20"]},
            "statsFailures": 4,
            "lastStatsError": {"session": "s1", "error": "OSError: [Errno 28] No space left"},
        },
    )
    assert cli.cmd_status(argparse.Namespace(json=False, socket_path=None)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "config warn  recall.limit: 99 is above 20; using 20" in out
    assert (
        "telemetry    4 record(s) not written; last: OSError: [Errno 28] No space left "
        "(session s1)" in out
    )


def test_a_healthy_daemon_shows_neither(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _status(monkeypatch, {"config": {"warnings": []}, "statsFailures": 0, "lastStatsError": None})
    assert cli.cmd_status(argparse.Namespace(json=False, socket_path=None)) == 0
    out = capsys.readouterr().out
    assert "config warn" not in out and "telemetry" not in out


def test_each_compiled_module_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`status.compiled` on one line, module by module; a daemon that predates it says
    the recall loops' state, as it always did."""
    compiled = {"recallLoops": "on", "surfaceLookup": "on", "storeListing": "not built"}
    _status(monkeypatch, {"version": "1", "kernels": "on", "compiled": compiled})
    assert cli.cmd_status(argparse.Namespace(json=False, socket_path=None)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "compiled     recall loops on, surface look-up on, store listing not built" in out
    _status(monkeypatch, {"version": "1", "kernels": "off"})
    assert cli.cmd_status(argparse.Namespace(json=False, socket_path=None)) == 0
    assert "recall loops compiled: off" in capsys.readouterr().out.splitlines()
