"""A memory's tokens are counted once per entry text (issue 10): a round with a context
window counts every memory of the block, and each count is a regex pass over its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.archive.tokens import estimate_text_tokens
from engine.recall import RecallState
from engine.recall import state as state_module
from engine.recall.state import Addition
from tests.engine.recall_fixtures import BASE_MS, config, disk_round, numbered_store


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return estimate_text_tokens(text)

    monkeypatch.setattr(state_module, "estimate_text_tokens", count)
    return counted


def test_an_addition_counts_its_text_once_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = _counting(monkeypatch)
    a = Addition(id="mem-1", alpha=0.8, beta=1.0, created_at_ms=BASE_MS, body="星港项目 plan")
    first = a.tokens
    assert first == estimate_text_tokens(a.text)
    assert [a.tokens, a.tokens] == [first, first]
    assert len(counted) == 1
    a.number = 2  # its entry is numbered anew: another text
    assert a.tokens == estimate_text_tokens(a.text)
    assert len(counted) == 2


def test_rounds_with_a_window_count_each_text_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = numbered_store(tmp_path, [0.8] * 6)
    cfg = config()
    rs = RecallState(path=store.paths.recall_state)
    counted = _counting(monkeypatch)
    for n, text in enumerate(["星港项目怎么样了", "星港项目 词2", "星港项目 词4"]):
        disk_round(store, rs, text, cfg, turn=n + 1, context_window=200_000)
    assert rs.additions
    assert counted, "the rounds counted tokens"
    assert len(counted) == len(set(counted))  # never the same text twice
