"""Expected failures of the command line are one readable line, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE_LOG = Path(__file__).parent.parent / "fixtures" / "session.v4.jsonl"


def _rofmd(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROFMD_")}
    return subprocess.run(
        [sys.executable, "-m", "rofmd", *argv], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "argv",
    [["demo"], ["replay", str(FIXTURE_LOG)], ["status"], ["reload"]],
    ids=["demo", "replay", "status", "reload"],
)
def test_a_missing_daemon_is_one_line_and_exit_1(tmp_path: Path, argv: list[str]) -> None:
    socket = tmp_path / "nobody.sock"
    out = _rofmd(argv[0], "--socket", str(socket), *argv[1:])
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    assert f"rofmd: cannot reach the daemon at {socket}: No such file or directory" in out.stderr
    assert "hint: start it with `rofmd serve`" in out.stderr


@pytest.mark.parametrize("argv", [["simulate"], ["show", "--memory-dir", "{tmp}"]])
def test_a_reader_that_stops_reading_gets_no_traceback(tmp_path: Path, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROFMD_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rofmd", *(a.format(tmp=tmp_path) for a in argv)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head` does once it has its lines: every write now fails
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def _commands() -> list[list[str]]:
    """Every command and `engine` subcommand the full parser knows."""
    import argparse

    from rofmd.cli.main import build_parser

    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    out: list[list[str]] = []
    for name, sub in subcommands(build_parser(full=True)).items():
        nested = subcommands(sub)
        out.extend([[name, n] for n in nested] if nested else [[name]])
    return out


def test_every_command_exits_2_on_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    from rofmd.cli.main import main

    commands = _commands()
    assert ["status"] in commands and ["engine", "recall"] in commands, commands
    for argv in commands:
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--no-such-flag"])
        assert exc.value.code == 2, argv
        err = capsys.readouterr().err
        assert "error:" in err and err.startswith("usage: rofmd"), (argv, err)
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "--window", "10", str(FIXTURE_LOG)], "--window must be at least 1024"),
        (["engine", "recall", "--text", " "], "--text must not be empty"),
        (["engine", "bogus"], "invalid choice"),
    ],
)
def test_bad_values_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    out = _rofmd(*argv)
    assert out.returncode == 2, out
    assert message in out.stderr and "Traceback" not in out.stderr
