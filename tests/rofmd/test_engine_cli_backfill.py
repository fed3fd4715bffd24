"""`rofmd engine backfill-assistant`: old folders get their 「你说过」 phrases once; a dry
run reads and counts, and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.assistant_keywords import FIELD
from engine.store import open_session
from tests.engine.recall_fixtures import nickname_folders, write_folders
from tests.rofmd.test_engine_cli import _json, _run, env  # noqa: F401 (the env fixture)


def _old_session(root: Path) -> list[str]:
    store = open_session(root, "old")
    return write_folders(store, nickname_folders(["小鲸", "小鹿", "小熊"]))


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_dry_run_then_backfill_then_nothing_left(
    env: dict[str, Any],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = env["root"]
    ids = _old_session(root)
    before = _files(root)
    assert _run(["engine", "backfill-assistant", *env["common"], "--dry-run", "--json"]) == 0
    out = _json(capsys)
    assert out["dryRun"] is True
    [s] = out["sessions"]
    assert (s["session"], s["missing"], s["filled"], s["withPhrases"]) == ("old", 3, 3, 3)
    assert _files(root) == before  # read-only

    assert _run(["engine", "backfill-assistant", *env["common"], "--session", "old"]) == 0
    captured = capsys.readouterr()
    assert "old: 3/3 folders" in captured.err  # progress
    assert "filled 3 (3 with phrases)" in captured.out
    metas = [
        orjson.loads((root / "sessions" / "old" / fid / "meta.json").read_bytes()) for fid in ids
    ]
    assert [m[FIELD] for m in metas] == [["叫你小鲸"], ["叫你小鹿"], ["叫你小熊"]]
    store = open_session(root, "old")
    assert [e.assistantKeywords for e in store.index] == [m[FIELD] for m in metas]

    assert _run(["engine", "backfill-assistant", *env["common"], "--json"]) == 0
    assert _json(capsys)["sessions"][0]["missing"] == 0
