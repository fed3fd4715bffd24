"""`rofmd repair-session-log` (issue 15, reference §6 "历史加载失败"): `--dry-run`
reports and changes nothing; the real run keeps a backup and only adds ids (other lines
byte for byte, zstd frame boundaries kept); what it cannot fix it reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from engine.sessionlog import compress_frames, iter_frames, read_log
from tests.passive_fixtures import TOPICS, SessionLog, header


def _repair(*args: str) -> tuple[int, dict[str, Any], str]:
    out = subprocess.run(
        [sys.executable, "-m", "rofmd", "repair-session-log", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = orjson.loads(out.stdout) if out.stdout.strip() else {}
    return out.returncode, doc, out.stderr


def _recall_message(seq: int, with_empty_id: bool) -> dict[str, Any]:
    """What the v1.2 experiment wrote: a recall block as a user message without an id."""
    data: dict[str, Any] = {
        "role": "user",
        "source": {"kind": "rofm-recall"},
        "content": [{"type": "text", "text": "## 记忆回忆\n- 端口 8443"}],
    }
    if with_empty_id:
        data = {"id": "", **data}
    return {"type": "user/message", "seq": seq, "time": 1, "data": data, "surfaceOp": "append"}


def _frames(path: Path) -> list[bytes]:
    data = path.read_bytes()
    with path.open("rb") as f:
        return [data[fr.start : fr.end] for fr in iter_frames(f) if fr.end is not None]


def test_dry_run_changes_nothing_and_the_repair_only_adds_ids(tmp_path: Path) -> None:
    log = SessionLog("repair-me")
    batches: list[list[dict[str, Any]]] = [[header(log.session_id)]]
    batches.append(log.exchange(TOPICS[0]))
    log.events.append(_recall_message(log.next_seq, with_empty_id=False))
    batches.append([log.events[-1], *log.exchange(TOPICS[1])])
    batches.append(log.exchange(TOPICS[2]))
    log.events.append(_recall_message(log.next_seq, with_empty_id=True))
    batches.append([log.events[-1]])
    path = tmp_path / "ws" / "s" / "session.v4.jsonl.zstd"
    path.parent.mkdir(parents=True)
    original = compress_frames(batches)
    path.write_bytes(original)

    code, doc, err = _repair("--dry-run", str(tmp_path))
    assert code == 0, err
    [report] = doc["files"]
    assert [f["seq"] for f in report["missingIds"]] == [4, 13]
    assert {f["kind"] for f in report["missingIds"]} == {"rofm-recall"}
    assert report["repaired"] is False and report["backup"] is None
    assert path.read_bytes() == original  # byte-identical
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]

    code, doc, err = _repair(str(path))
    assert code == 0, err
    [report] = doc["files"]
    assert report["repaired"] is True
    backup = Path(report["backup"])
    assert backup.name.startswith(path.name + ".bak-") and backup.read_bytes() == original
    # frame boundaries kept: the untouched frames are the very same bytes
    before, after = _frames(backup), _frames(path)
    assert len(before) == len(after) == len(batches)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [2, 4]
    old_events, new_events = read_log(original).events, read_log(path.read_bytes()).events
    assert len(old_events) == len(new_events)
    for old, new in zip(old_events, new_events, strict=True):
        if old.get("seq") in (4, 13):
            added = new["data"].pop("id")
            assert added.startswith(f"repaired-{old['seq']}-")
            old["data"].pop("id", None)
        assert orjson.dumps(new) == orjson.dumps(old)  # nothing else, not even the field order
    # every message now has an id; running again finds nothing to do
    code, doc, err = _repair(str(path))
    assert code == 0 and doc["missingIds"] == 0 and doc["repaired"] == 0, err
    assert len(list(path.parent.glob("*.bak-*"))) == 1


def test_plain_logs_torn_lines_and_what_needs_a_person(tmp_path: Path) -> None:
    events = [
        header("repair-plain"),
        {"type": "user/message", "seq": 0, "data": {"role": "user", "source": {"kind": "user"}}},
        {
            "type": "assistant/message",
            "seq": 1,
            "data": {"message": {"id": "a1", "role": "assistant", "content": []}, "turn": 1},
        },
    ]
    lines = [orjson.dumps(e) for e in events]
    lines[2] = lines[2].replace(b'"seq":1', b'"seq": 1')  # formatting the repair must keep
    torn = b'{"type":"user/mess'
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n" + torn)
    code, doc, _ = _repair(str(path))
    assert code == 1  # a person must add what is missing
    [report] = doc["files"]
    assert [f["seq"] for f in report["missingIds"]] == [0]
    manual = {(f["seq"], tuple(f["missing"])) for f in report["manual"]}
    assert manual == {(0, ("content",)), (1, ("source",))}
    assert report["torn"] is True and report["repaired"] is True
    out = path.read_bytes().split(b"\n")
    assert out[0] == lines[0] and out[2] == lines[2] and out[3] == torn
    assert orjson.loads(out[1])["data"]["id"].startswith("repaired-0-")
    text = subprocess.run(
        [sys.executable, "-m", "rofmd", "repair-session-log", "--dry-run", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "every message has an id" in text.stdout and "fix it by hand" in text.stdout


def test_a_terminal_gets_a_progress_bar(tmp_path: Path, monkeypatch: Any) -> None:
    """On a terminal the repair draws a bar on stderr; elsewhere it draws nothing."""
    import argparse
    import io

    from rofmd.cli import repair_log_cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    log = SessionLog("repair-bar")
    for text in TOPICS:
        log.exchange(text)
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(compress_frames([[header(log.session_id)], log.events]))
    args = argparse.Namespace(path=tmp_path, dry_run=True, json=True)
    for stream, drawn in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert repair_log_cli.cmd_repair(args) == 0
        text = stream.getvalue()
        assert ("repair-session-log [" in text and "100.0%" in text) is drawn, text
