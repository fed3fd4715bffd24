"""`rofmd search` searches what recall searches: a question's Chinese question words are
cut out of the query (engine.recall.query.search_text), so a memory of other questions
("什么时候…？什么时候…？") does not outrank the memory that holds the answer."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engine.store import open_session
from rofmd.cli.main import main
from tests.cli_env import isolate_cli
from tests.engine.recall_fixtures import BASE_MS, write_folders

SESSION = "questions"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mem = isolate_cli(monkeypatch, tmp_path)
    asks = "什么时候开会？什么时候交报告？什么时候放假？到底什么时候？"
    folders = [
        {"keywords": ["开会", "报告"], "messages": [{"role": "user", "content": asks}]},
        {
            "keywords": ["日本旅行", "出发"],
            "messages": [
                {"role": "user", "content": "日本旅行定在十月三号出发，先去大阪再去京都。"},
                {"role": "assistant", "content": "好的，记下了出发日期和路线。"},
            ],
        },
    ]
    write_folders(
        open_session(mem, SESSION),
        [
            {"createdAt": BASE_MS + i * 60_000, "alpha": 0.6, "beta": 5, **f}
            for i, f in enumerate(folders)
        ],
    )
    return mem


def test_question_words_do_not_rank(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "日本旅行是什么时候", "--memory-dir", str(root), "--json"]
    assert main(argv) == 0
    (result,) = orjson.loads(capsys.readouterr().out)["sessions"]
    snippets = [h["snippet"] for h in result["hits"]]
    assert snippets and "日本旅行" in snippets[0]
    # the question-only memory shares nothing with the question but its question words
    assert all("开会" not in t for t in snippets)
