"""The operator's read tools on a store a real daemon built: `selfcheck`, `show`, `search`,
`audit`, `engine list` / `report`.

One daemon builds one session over the socket (archive, commit, judge every folder,
recall), and a second session stays pending. Every tool then runs against the daemon's
own memory root while it serves it, and must leave every file as it was (content and
mtime); `show` must print exactly the block `prompt/sections` answers. The checks that
change files (a damaged index, `audit --apply`) run on a copy.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from engine.store.layout import session_dir_paths
from engine.store.readonly import read_store
from rofmd.cli.main import main
from tests.archive_fixtures import Surface, floored_params
from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon

SESSION = "ops-e2e"
PENDING = "ops-pending"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}
QUESTION = "配置文件检查的结果怎么样？"


@dataclass
class Built:
    daemon: DaemonProcess
    folders: list[str]
    sections: dict[str, str]


def _conversation(tag: str) -> Surface:
    s = Surface()
    s.system()
    for i in range(24):
        s.turn_pair(i, 300)
    s.user(f"{tag}：现在继续。")
    return s


def _archive(c: LineSocket, rid: int, sid: str) -> list[str]:
    answer = c.call(rid, "agent/pre-step", floored_params(_conversation(sid), sid))
    comp = answer["result"]["compaction"]
    assert comp is not None, answer
    token = comp["token"]
    assert c.call(rid + 1, "archive/commit", {"session": {"id": sid}, "token": token})["result"]
    folders: list[str] = comp["folders"]
    return folders


@pytest.fixture(scope="module")
def built() -> Iterator[Built]:
    with running_daemon() as d:
        c = LineSocket(d.socket_path, timeout=60)
        c.call(0, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
        folders = _archive(c, 1, SESSION)
        updates = [
            {
                "id": fid,
                "alpha": 0.9 if n == 0 else 0.4,
                "beta": 6 if n == 0 else 1,
                "keywords": ["配置文件", "检查结果", f"第{n}段"],
                "reason": "配置检查",
            }
            for n, fid in enumerate(folders)
        ]
        judged = c.call(
            3,
            "tools/call",
            {
                "session": {"id": SESSION},
                "turn": 30,
                "callId": "j1",
                "name": "memory_judge",
                "arguments": {"updates": updates},
            },
        )
        assert judged["result"]["isError"] is False, judged
        message = {
            "id": "u-1",
            "role": "user",
            "content": [{"type": "text", "text": QUESTION}],
            "source": {"kind": "user"},
        }
        inbox = c.call(
            4,
            "agent/inbox/inserted",
            {"session": {"id": SESSION}, "message": message, "time": 1_791_400_000_000},
        )
        assert inbox["result"]["recalled"], inbox
        _archive(c, 5, PENDING)
        answer = c.call(7, "prompt/sections", {"session": {"id": SESSION}})["result"]
        sections = {s["name"]: s["text"] for s in answer["sections"]}
        assert sections["dsh-rofm:recall"].startswith("## 记忆回忆")
        c.close()
        yield Built(d, folders, sections)


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: its digest and mtime (ns)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(root))] = (
                hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest(),
                st.st_mtime_ns,
            )
        elif path.is_dir():
            out[str(path.relative_to(root)) + "/"] = ("dir", path.stat().st_mtime_ns)
    return out


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _where(d: DaemonProcess, root: Path | None = None) -> list[str]:
    return ["--memory-dir", str(root or d.memory_root), "--config-dir", str(d.config_dir)]


def _engine_where(d: DaemonProcess) -> list[str]:
    """`rofmd engine`'s spelling of `_where` (``--memory-root``)."""
    return ["--memory-root", str(d.memory_root), "--config-dir", str(d.config_dir)]


def test_the_read_tools_change_no_file(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    d = built.daemon
    before = _tree(d.memory_root)
    sessions = ["--sessions-dir", str(d.base / "sessions")]
    code, out, err = _run(capsys, "selfcheck", *_where(d), *sessions)
    assert code == 0, out + err
    lines = out.splitlines()
    assert [line.split(" — ")[0] for line in lines[:-1]] == [
        "[PASS] config",
        "[PASS] engine",
        "[PASS] memory store",
        "[PASS] recall state",
        "[PASS] pending era",
        "[PASS] time index",
        lines[6].split(" — ")[0],  # fairness: PASS or WARN, by what the rounds did
        "[PASS] event tags",
        "[WARN] session logs",  # the test daemon has no session logs
    ]
    assert "2 store(s)" in lines[2] and f"{len(built.folders)} scored" in lines[2]
    assert lines[-1].startswith("selfcheck: ") and lines[-1].endswith(" 0 failed")
    for argv in (
        ["show", *_where(d)],
        ["show", *_where(d), "--session", SESSION],
        ["show", *_where(d), "--session", SESSION, "--json"],
        ["search", "配置文件", *_where(d)],
        ["search", "配置文件", *_where(d), "--session", SESSION, "--json"],
        ["audit", *_where(d), "--json"],
        ["engine", "list", *_engine_where(d)],
        ["engine", "report", *_engine_where(d)],
        ["selfcheck", *_where(d), *sessions, "--json", "--session", SESSION],
    ):
        code, out, err = _run(capsys, *argv)
        assert code == 0, (argv, out, err)
    assert _tree(d.memory_root) == before


def test_show_prints_what_prompt_sections_answers(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    d = built.daemon
    block = built.sections["dsh-rofm:recall"]
    code, out, _ = _run(capsys, "show", *_where(d), "--session", SESSION, "--json")
    assert code == 0
    doc = orjson.loads(out)
    assert doc["block"] == block
    assert doc["counts"]["folders"] == len(built.folders) == doc["counts"]["scored"]
    summary = doc["recallState"]
    assert summary["version"] == 3 and summary["blockChars"] == len(block)
    assert summary["additions"] == len(summary["entries"]) >= 1
    assert {e["id"] for e in summary["entries"]} <= set(built.folders)
    code, out, _ = _run(capsys, "show", *_where(d), "--session", SESSION)
    assert f"-----\n{block}\n-----\n" in out
    assert out.count(block) == 1  # the snapshot summary does not print it again
    code, out, _ = _run(
        capsys, "show", "--live", "--session", SESSION, "--socket", str(d.socket_path), "--json"
    )
    assert code == 0 and orjson.loads(out)["block"] == block
    code, out, _ = _run(capsys, "show", *_where(d))
    assert f"session {PENDING}  " in out and f"session {SESSION}  " in out


def test_search_ranks_titles_and_snippets(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    d = built.daemon
    code, out, _ = _run(
        capsys, "search", "配置文件", "检查结果", *_where(d), "--session", SESSION, "--json"
    )
    assert code == 0
    [result] = orjson.loads(out)["sessions"]
    hits = result["hits"]
    assert hits and {h["id"] for h in hits} <= set(built.folders)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert all(h["title"] and h["date"] for h in hits)
    assert any("配置文件" in h["snippet"] for h in hits)
    code, out, _ = _run(capsys, "search", "配置文件", *_where(d), "--session", SESSION)
    assert f"— {hits[0]['id']} · " in out and "score " in out
    code, out, _ = _run(capsys, "search", "配置文件", *_where(d), "--session", PENDING, "--json")
    [pending] = orjson.loads(out)["sessions"]
    assert pending["hits"] == [] and pending["pending"] > 0


def _copy(built: Built, tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    shutil.copytree(built.daemon.memory_root, root)
    return root


def test_selfcheck_fails_naming_the_folder_whose_index_row_is_stale(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = built.daemon
    root = _copy(built, tmp_path)
    index = root / "sessions" / SESSION / "index.json"
    doc = orjson.loads(index.read_bytes())
    victim = built.folders[1]
    for row in doc["folders"]:
        if row["id"] == victim:
            row["alpha"] = 0.77
    index.write_bytes(orjson.dumps(doc))
    code, out, _ = _run(capsys, "selfcheck", *_where(d, root), "--sessions-dir", str(tmp_path))
    assert code == 1
    [line] = [x for x in out.splitlines() if x.startswith("[FAIL] memory store")]
    assert f"{SESSION}/{victim}: index.json disagrees with meta.json" in line
    assert "alpha index 0.77 ≠ meta 0.4" in line
    assert out.splitlines()[-1].endswith(" 1 failed")


def test_audit_apply_writes_only_pending_era(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = built.daemon
    # refused while the daemon serves the memory root
    code, _, err = _run(capsys, "audit", *_where(d), "--apply", "--socket", str(d.socket_path))
    assert code == 1 and "stop it before --apply" in err
    root = _copy(built, tmp_path)
    paths = session_dir_paths(root, PENDING)
    rows_before = {e.id: e.row() for e in read_store(paths, PENDING).index}
    assert rows_before and all(r["scored"] is False for r in rows_before.values())
    before = _tree(root)
    nobody = str(tmp_path / "nobody.sock")
    code, out, _ = _run(capsys, "audit", *_where(d, root), "--json", "--apply", "--socket", nobody)
    assert code == 0
    doc = orjson.loads(out)
    assert doc["written"] == {PENDING: list(rows_before)}
    assert doc["unmarked"] == 0 and doc["totals"]["pendingByEra"]["current"] == len(rows_before)
    after = _tree(root)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    pending_dir = f"sessions/{PENDING}"
    # index.json rewritten (its log, if any, folded in and dropped); nothing else
    assert changed <= {
        f"{pending_dir}/index.json",
        f"{pending_dir}/index.log.jsonl",
        f"{pending_dir}/",
    }
    assert f"{pending_dir}/index.json" in changed
    rows_after = {e.id: e.row() for e in read_store(paths, PENDING).index}
    for fid, row in rows_after.items():
        assert row == {**rows_before[fid], "pendingEra": "current"}
    # a second run has nothing left to mark, and the figures stay
    code, out, _ = _run(capsys, "audit", *_where(d, root), "--apply", "--socket", nobody)
    assert code == 0 and "wrote pendingEra on 0 folder(s)" in out


def test_engine_report_has_eras_time_filters_and_dir(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    d = built.daemon
    code, out, _ = _run(capsys, "engine", "report", *_engine_where(d), "--json")
    assert code == 0
    rep = orjson.loads(out)
    assert rep["eras"]["pending"] > 0 and rep["eras"]["measures"]["C"]["folders"] > 0
    assert rep["fairness"]["events"] >= 1 and "timeFilteredRounds" in rep["fairness"]
    one = d.memory_root / "sessions" / PENDING
    code, out, _ = _run(capsys, "engine", "report", "--dir", str(one), "--json")
    assert code == 0
    only = orjson.loads(out)
    assert only["sessions"] == [PENDING] and only["dir"] == str(one.resolve())
    assert only["eras"]["folders"] == only["eras"]["pending"] > 0
    assert only["recall"]["rounds"] == 0
    code, out, _ = _run(capsys, "engine", "report", *_engine_where(d))
    assert "pending eras " in out and "time filters " in out
