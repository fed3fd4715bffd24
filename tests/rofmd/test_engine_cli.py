"""`rofmd engine init|compress|recall|list|report`, through the parser the lead mounts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from rofmd.cli.engine_cli import add_engine_parser
from tests.cli_env import isolate_cli

NOW = 1_793_610_000_000


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rofmd")
    add_engine_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    code: int = args.func(args)
    return code


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An isolated memory root and config dir; no daemon settings from the environment."""
    root = isolate_cli(monkeypatch, tmp_path)
    return {"root": root, "common": ["--memory-root", str(root)], "tmp": tmp_path}


def _conversation(path: Path, used: float | None = 63.2) -> Path:
    messages: list[dict[str, Any]] = []
    for i in range(12):
        messages.append(
            {
                "role": "user",
                "content": f"第{i}轮:我决定把部署端口定为 {8000 + i},以后都用这个端口。"
                f" Deploy host h{i}.example.com",
            }
        )
        messages.append({"role": "assistant", "content": f"好的,记下了端口 {8000 + i}。" * 30})
    doc: dict[str, Any] = {"messages": messages}
    if used is not None:
        doc["usedPercent"] = used
    path.write_bytes(orjson.dumps(doc))
    return path


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return orjson.loads(capsys.readouterr().out)


def test_init_creates_and_says_where(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["engine", "init", *env["common"]]) == 0
    out = capsys.readouterr().out
    assert str(env["root"]) in out and "session      cli" in out
    assert (env["root"] / "sessions" / "cli").is_dir()
    assert _run(["engine", "init", *env["common"], "--session", "s/1", "--json"]) == 0
    doc = _json(capsys)
    assert doc["session"] == "s/1" and Path(doc["sessionDir"]).is_dir()
    assert doc["folders"] == 0


def test_default_memory_root_is_the_daemons(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["engine", "init", "--json"]) == 0
    assert _json(capsys)["memoryRoot"] == str(env["tmp"] / "state" / "rofmd" / "memory")


def test_compress_list_recall_report(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    conv = _conversation(env["tmp"] / "conversation.json")
    common = env["common"]
    argv = ["engine", "compress", *common, "--input", str(conv), "--used-percent", "63"]
    assert _run([*argv, "--now-ms", str(NOW), "--json"]) == 0
    doc = _json(capsys)
    assert doc["outcome"] == "archive"
    assert doc["usedPercent"] == 63.0 and doc["window"] == 128000
    assert doc["archivedMessages"] == 6 and doc["seqRange"] == [0, 5]
    assert [f["id"] for f in doc["folders"]] == [
        "mem-20261102T090000Z-0001",
        "mem-20261102T090000Z-0002",
    ]
    assert all(0 < f["alpha"] <= 1 and f["beta"] == 0 for f in doc["folders"])
    assert doc["note"].startswith("[memory] 2 段")
    for f in doc["folders"]:
        assert "user" not in f["keywords"] and "assistant" not in f["keywords"]

    meta = orjson.loads(
        (env["root"] / "sessions" / "cli" / doc["folders"][0]["id"] / "meta.json").read_bytes()
    )
    assert meta["scored"] is True and meta["scoreMode"] == "heuristic"
    assert meta["alphaSource"] == "heuristic" and meta["archivedFrom"] == "engine"
    assert "pendingSince" not in meta
    assert not list((env["root"] / "sessions" / "cli").glob(".commit-*"))

    assert _run(["engine", "list", *common]) == 0
    out = capsys.readouterr().out
    assert "session cli  2 folders, 0 pending" in out and "scored" in out
    assert _run(["engine", "list", *common, "--json"]) == 0
    listed = _json(capsys)["sessions"]
    assert [s["session"] for s in listed] == ["cli"]
    row = listed[0]["folders"][0]
    assert {k: row[k] for k in ("scored", "rescorePending", "pending")} == {
        "scored": True,
        "rescorePending": False,
        "pending": False,
    }

    recall = [
        "engine",
        "recall",
        *common,
        "--text",
        "上次说的部署端口是多少",
        "--now-ms",
        str(NOW + 60_000),
    ]
    assert _run([*recall, "--context", "token=41000", "window=128000", "--json"]) == 0
    got = _json(capsys)
    assert got["ran"] and got["recalled"]
    assert got["addedChars"] > 0 and got["contextTokens"] == 41000
    assert "## 记忆回忆" in got["block"] and "8000" in got["block"]
    # same store and state: the human form prints the block
    assert _run([*recall, "--context", "token=41000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("recalled ") and "## 记忆回忆" in out

    assert _run(["engine", "report", *common, "--json"]) == 0
    rep = _json(capsys)
    assert rep["sessions"] == ["cli"]
    assert rep["compress"]["count"] == 1 and rep["compress"]["folders"] == 2
    assert rep["pending"] == {
        "created": 0,
        "scoredAtArchive": 2,
        "heuristicScored": 2,
        "judgeRounds": 0,
        "judgeUpdated": 0,
    }
    assert rep["recall"]["rounds"] == 2
    assert rep["recall"]["addedChars"] == got["addedChars"]
    assert rep["recall"]["shareOfContext"] == pytest.approx(
        got["addedTokens"] / 82000, abs=1e-6
    )  # two rounds at 41000 tokens, the second added nothing new
    assert rep["recall"]["averageMs"] is not None
    assert (
        rep["beta"]["count"] == len(got["recalled"]) and rep["beta"]["mid"] == rep["beta"]["count"]
    )
    assert _run(["engine", "report", *common]) == 0
    out = capsys.readouterr().out
    for line in (
        "context added back",
        "per generation",
        "compressions             1",
        "archived images",
        "pinned context merged",
        "checkpoint notes merged",
    ):
        assert line in out


def test_compress_below_trigger_and_from_file(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    conv = _conversation(env["tmp"] / "c.json", used=40)
    assert _run(["engine", "compress", *env["common"], "--input", str(conv)]) == 0
    assert (
        "nothing archived: 40% is not above compress.triggerPercent 60%" in capsys.readouterr().out
    )
    assert _run(["engine", "list", *env["common"], "--json"]) == 0
    assert _json(capsys)["sessions"][0]["folders"] == []


def test_report_and_list_on_an_empty_root(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["engine", "list", *env["common"]]) == 0
    assert "no sessions under" in capsys.readouterr().out
    assert _run(["engine", "report", *env["common"], "--json"]) == 0
    rep = _json(capsys)
    assert rep["recall"]["shareOfContext"] is None and rep["beta"]["mean"] is None
    assert _run(["engine", "report", *env["common"]]) == 0
    assert "n/a" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message", "code"),
    [
        (["engine"], "required", 2),
        (["engine", "bogus"], "invalid choice", 2),
        (["engine", "compress"], "--input", 2),
        (["engine", "compress", "--input", "{conv}", "--window", "abc"], "invalid int value", 2),
        (["engine", "compress", "--input", "{missing}"], "cannot read", 1),
        (["engine", "compress", "--input", "{bad}"], "invalid JSON", 1),
        (["engine", "compress", "--input", "{wrong}"], "messages[0].role", 1),
        (["engine", "compress", "--input", "{nopct}"], "--used-percent is required", 2),
        (["engine", "compress", "--input", "{conv}", "--used-percent", "140"], "within 0..100", 2),
        (["engine", "compress", "--input", "{conv}", "--window", "0"], "--window must be", 2),
        (["engine", "recall"], "--text", 2),
        (["engine", "recall", "--text", "  "], "--text must not be empty", 2),
        (["engine", "recall", "--text", "x", "--context", "tokens"], "token=N window=N", 2),
        (["engine", "recall", "--text", "x", "--context", "window=big"], "whole number", 2),
        (["engine", "init", "--session", ""], "--session must not be empty", 2),
    ],
)
def test_bad_arguments_exit_2_and_unusable_input_1(
    env: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
    code: int,
) -> None:
    tmp = env["tmp"]
    files = {
        "conv": _conversation(tmp / "conv.json"),
        "missing": tmp / "nope.json",
        "bad": tmp / "bad.json",
        "wrong": tmp / "wrong.json",
        "nopct": _conversation(tmp / "nopct.json", used=None),
    }
    files["bad"].write_text("{not json")
    files["wrong"].write_bytes(orjson.dumps({"messages": [{"role": "robot", "content": "x"}]}))
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    if len(argv) > 1:
        argv = [*argv[:2], *env["common"], *argv[2:]]
    assert _run(argv) == code
    assert message in capsys.readouterr().err


def test_bad_config_file_is_one_line(
    env: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg_dir = env["tmp"] / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "config.json").write_text("[1]")
    assert _run(["engine", "list", *env["common"], "--config-dir", str(cfg_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rofmd engine list: config:") and "expected an object" in err
