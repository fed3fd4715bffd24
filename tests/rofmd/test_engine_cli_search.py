"""`rofmd engine recall --keywords/--limit/--offset`: memory_recall's search without a
daemon, read-only."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.store import open_session
from tests.cli_env import isolate_cli
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.rofmd.test_engine_cli import _run

SESSION = "cli"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mem = isolate_cli(monkeypatch, tmp_path)
    store = open_session(mem, SESSION)
    write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + i * 60_000,
                "alpha": 0.9 - 0.1 * i,
                "beta": 5,
                "keywords": ["部署端口", f"主机{i}"],
                "messages": [
                    {"role": "user", "content": f"部署端口定为 {8000 + i}，主机{i}。"},
                    {"role": "assistant", "content": f"记下了端口 {8000 + i}。"},
                ],
            }
            for i in range(4)
        ],
    )
    return mem


def _tree(path: Path) -> dict[str, str]:
    """Every file under `path` with the hash of its bytes (and nothing else there)."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _search(root: Path, *extra: str) -> list[str]:
    return ["engine", "recall", "--memory-root", str(root), "--keywords", "部署端口", *extra]


def test_pages_like_the_tool_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a recall round first (about something else), so that there is a recall-state.json
    assert _run(["engine", "recall", "--memory-root", str(root), "--text", "今天天气怎么样"]) == 0
    assert (root / "sessions" / SESSION / "recall-state.json").exists()
    capsys.readouterr()
    before = _tree(root)
    pages: list[Any] = []
    for offset in ("0", "1"):
        assert _run([*_search(root, "--limit", "1", "--offset", offset, "--json")]) == 0
        pages.append(orjson.loads(capsys.readouterr().out))
    assert _run([*_search(root, "--limit", "2", "--offset", "0", "--json")]) == 0
    both = orjson.loads(capsys.readouterr().out)
    assert pages[0]["ids"] + pages[1]["ids"] == both["ids"] and len(set(both["ids"])) == 2
    assert pages[0]["page"]["hasMore"] is True and pages[0]["page"]["nextOffset"] == 1
    assert both["text"].startswith(texts.RECALL_TOOL_HEADING)
    # unpaginated, human-readable: the tool's text
    assert _run(_search(root, "--limit", "3")) == 0
    out = capsys.readouterr().out
    assert out.startswith(texts.RECALL_TOOL_HEADING) and "### 回忆 1 · " in out
    assert "user: 部署端口定为" in out
    assert _tree(root) == before  # no recall state, no telemetry, nothing


def test_a_session_without_a_directory_stays_without_one(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _tree(root)
    assert _run([*_search(root, "--session", "nobody", "--limit", "2", "--json")]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["found"] == 0 and doc["missType"] == "keyword"
    assert _tree(root) == before and not (root / "sessions" / "nobody").exists()


def test_out_of_range_and_refusals(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([*_search(root, "--limit", "50", "--json")]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["page"]["limit"] == 20
    assert texts.RECALL_TOOL_WARN_LIMIT.format(given=50, used=20) in doc["warnings"]
    argv = ["engine", "recall", "--memory-root", str(root), "--keywords", " , "]
    assert _run(argv) == 1  # the tool's refusal
    assert capsys.readouterr().out.strip() == texts.RECALL_TOOL_NEED_KEYWORDS
    assert _run([*argv[:-1], ""]) == 2  # a usage error
    assert "--keywords (or --text) must not be empty" in capsys.readouterr().err
