"""A recall round's telemetry: its `recall` and `recall-block` records reach
`stats.jsonl` in one durable write (one append, one fsync) before the answer, as the
same lines two appends would have written; that append and the recall state's are in
flight at once (`engine.concurrent_io.together`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.jsonio import FsOps, append_jsonl
from engine.recall.state_log import log_path
from engine.store import open_session
from engine.store.stats import append_stats, read_jsonl
from tests.appends_fixtures import noting_appends, using_fs
from tests.engine.recall_fixtures import BASE_MS
from tests.handlers.inbox_fixtures import session_with_folders, user_message
from tests.rofmd.eviction_harness import core

SID = "telemetry"


def _ask(text: str, mid: str, time_ms: int) -> dict[str, Any]:
    return user_message(SID, text, mid, time_ms)


def test_records_of_one_call_are_one_append_of_their_lines(tmp_path: Path) -> None:
    first, second = {"type": "recall", "round": 1, "名": "回忆"}, {"type": "recall-block"}
    apart, together = tmp_path / "apart.jsonl", tmp_path / "together.jsonl"
    append_stats(apart, first)
    append_stats(apart, second)
    with noting_appends() as noted:
        append_stats(together, first, second)
    assert together.read_bytes() == apart.read_bytes()
    assert [p for p, _ in noted.appends] == [together]
    assert list(read_jsonl(together)) == [first, second]


def test_a_torn_tail_still_gets_its_newline_before_the_records(tmp_path: Path) -> None:
    path = tmp_path / "stats.jsonl"
    path.write_bytes(b'{"type":"recall","ro')  # a crash tore the last line
    assert append_jsonl(path, {"a": 1}, {"b": 2}) == len(b'\n{"a":1}\n{"b":2}\n')
    assert path.read_bytes() == b'{"type":"recall","ro\n{"a":1}\n{"b":2}\n'
    assert list(read_jsonl(path)) == [{"a": 1}, {"b": 2}]


def test_a_record_that_is_no_mapping_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "stats.jsonl"
    with pytest.raises(TypeError):
        append_stats(path, {"type": "recall"}, ["not", "a", "record"])  # type: ignore[arg-type]
    assert not path.exists()


def test_a_failed_write_counts_every_record_it_held(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s1")
    store.paths.stats.mkdir(parents=True)  # every append now fails
    errors: list[OSError] = []
    store.on_stats_error = errors.append
    assert not store.append_stats({"type": "recall"}, {"type": "recall-block"})
    assert store.stats_failures == 2
    assert len(errors) == 1


async def test_a_round_writes_its_two_records_in_one_durable_append(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    async with core(root) as c:
        store = await session_with_folders(c, SID, 4)
        stats = store.paths.stats
        rounds = 0
        for n, text in enumerate(["星港项目怎么样了", "星港项目 词2", "完全无关的话"]):
            with noting_appends() as noted:
                answer = await c.call(
                    "agent/inbox/inserted", _ask(text, f"m{n}", BASE_MS + 10**7 + n)
                )
            assert isinstance(answer["sections"], list)
            assert bool(answer["recalled"]) == (n == 0)
            to_stats = [data for path, data in noted.appends if path == stats]
            assert len(to_stats) == 1, noted.appends
            lines = to_stats[0].splitlines()
            assert [orjson.loads(line)["type"] for line in lines] == ["recall", "recall-block"]
            rounds += 1
        written = [r for r in read_jsonl(stats) if r["type"] in ("recall", "recall-block")]
        assert [r["type"] for r in written] == ["recall", "recall-block"] * rounds
        assert [r["round"] for r in written[::2]] == [1, 2, 3]


class _Meeting(FsOps):
    """Appends to the paths in `meet` wait for each other: one after the other, the
    first would wait in vain (and the round would fail)."""

    def __init__(self, meet: set[Path]) -> None:
        self.meet = meet
        self.barrier = threading.Barrier(len(meet), timeout=5.0)
        self.met: list[Path] = []

    def append_sync(self, path: Path, data: bytes) -> None:
        if path in self.meet:
            self.barrier.wait()
            self.met.append(path)
        super().append_sync(path, data)


async def test_the_state_and_the_telemetry_of_a_round_are_written_at_once(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    async with core(root) as c:
        store = await session_with_folders(c, SID, 4)
        # the first save of the state is its snapshot; from the second on, a log line
        await c.call("agent/inbox/inserted", _ask("星港项目怎么样了", "m0", BASE_MS + 10**7))
        log = log_path(store.paths.recall_state)
        with using_fs(_Meeting({store.paths.stats, log})) as fs:
            answer = await c.call(
                "agent/inbox/inserted", _ask("星港项目 词2", "m1", BASE_MS + 10**7 + 1)
            )
        assert "recalled" in answer, answer
        assert sorted(map(str, fs.met)) == sorted(map(str, [store.paths.stats, log]))
        rounds = [r["round"] for r in read_jsonl(store.paths.stats) if r["type"] == "recall"]
        assert rounds == [1, 2]
        assert b"m1" in log.read_bytes()
