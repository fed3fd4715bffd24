"""`rofmd simulate`: deterministic, pinned numbers, both output forms."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from rofmd.host.simulate import add_simulate_parser, run_simulation


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rofmd")
    add_simulate_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


# recalled / addedBack* / finalPercent re-pinned when ranked recall stopped searching for
# Chinese question words (什么, 哪里 …): two fewer memories come back, the same answers
PINNED: dict[str, Any] = {
    "turns": 35,
    "messages": 92,
    "archives": 10,
    "folders": 291,
    "archivedMessages": 78,
    "archivedChars": 297185,
    "recallRounds": 35,
    "recalled": 69,
    "addedBackChars": 83796,
    "addedBackTokens": 22927,
    "distinctRecalledChars": 41261,
    "addedBackRatio": 0.1388,
    "peakPercent": 86.03,
    "finalPercent": 42.57,
}


def test_json_numbers_are_pinned(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["simulate", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert {k: out[k] for k in PINNED} == PINNED
    found = [a["expect"] for a in out["answers"] if a["found"]]
    assert found == [
        "8443",
        "Lisbon",
        "川菜",
        "November 20",
        "db-7.internal",
        "2 小时",
        "imperative",
    ]
    rep = out["report"]
    assert rep["compress"]["count"] == 10
    assert rep["compress"]["folders"] == 291
    assert rep["pending"]["created"] == 0
    assert rep["pending"]["scoredAtArchive"] == 291
    assert rep["recall"]["addedChars"] == PINNED["addedBackChars"]
    assert "averageMs" not in rep["recall"]


def test_same_numbers_every_run(tmp_path: Path) -> None:
    a = run_simulation(tmp_path / "a").to_json()
    b = run_simulation(tmp_path / "b").to_json()
    assert a == b


def test_human_output_and_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "mem"
    assert _run(["simulate", "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert "added-back ratio 13.88% of the archived conversation" in out
    assert "added back      83796 chars" in out
    assert "archives        10 (291 folders" in out
    assert (keep / "sessions" / "simulate" / "index.json").is_file()
    # a non-empty --keep directory is refused
    assert _run(["simulate", "--keep", str(keep)]) == 2
    assert "must be a new or empty directory" in capsys.readouterr().err
