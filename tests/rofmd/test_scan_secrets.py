"""`rofmd scan-secrets` over a store archived before redaction (issue 19): the report
names folders and kinds (never a value), ``--apply`` backs up, rewrites the folders and
the files that repeat their text, and the store reopens clean with no secret byte left;
the backup restores the old store; a kill at any step of the rewrite leaves every folder
old or new, never a half, and the index matching the metas."""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.recall.state import Addition, RecallState
from engine.relevance.folder_text import SNAPSHOT_NAME
from engine.secrets import rewrite
from engine.secrets.store_scan import scan_folder
from engine.store import FolderMeta, SessionStore, make_idempotency_key, open_session
from rofmd.cli.main import main
from tests.engine.test_store_crash import FaultyFs, Injected, using
from tests.secrets_corpus import PLANTED

NOW = 1_767_225_600_000
SID = "old-session"
SECRETS = [p for p in PLANTED if p.role in ("user", "tool")][:6]
VALUES = [p.value for p in SECRETS]


def build_old_store(root: Path) -> SessionStore:
    """Three folders with secrets (in text, title, keywords), two clean ones; a recall
    state and a telemetry line repeating a secret; a relevance snapshot."""
    store = open_session(root, SID)
    with store.transaction("arc-old", keep_record=False) as txn:
        for n in range(5):
            dirty = n < 3
            planted = SECRETS[n * 2 : n * 2 + 2] if dirty else []
            text = "\n".join(p.text for p in planted) or f"普通对话 {n}：部署端口 8080"
            meta = FolderMeta.model_validate(
                {
                    "id": store.new_folder_id(NOW + n),
                    "createdAt": NOW + n,
                    "scored": True,
                    "alpha": 0.5,
                    "title": (planted[0].text if planted else f"普通 {n}")[:24],
                    "keywords": ["部署", planted[1].value if planted else "端口"],
                    "idempotencyKey": make_idempotency_key(SID, 1, n, n, "h", n),
                }
            )
            txn.add_folder(meta, [{"role": "user", "content": text, "seq": n}])
    first = store.index[0]
    shown = Addition(first.id, 0.5, 0, first.createdAt, body=f"user: {SECRETS[0].text}")
    rs = RecallState(path=store.paths.recall_state, additions=[shown])
    rs.render()
    rs.save()
    store.append_stats({"type": "compress-applied", "folderMetadata": [{"title": VALUES[1]}]})
    (store.dir / SNAPSHOT_NAME).write_bytes(b"snapshot " + VALUES[2].encode())
    return store


def leaks(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [
                path.name for v in VALUES if v.encode() in data or orjson.dumps(v)[1:-1] in data
            ]
    return found


def run(*argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["scan-secrets", "--socket", "/nonexistent/rofmd.sock", *argv])
    text = out.getvalue()
    return code, orjson.loads(text) if text.startswith("{") else text


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    memory = tmp_path / "mem"
    build_old_store(memory)
    yield memory


def test_report_names_folders_and_kinds_only(root: Path) -> None:
    code, report = run("--memory-root", str(root), "--json")
    assert code == 0 and report["applied"] is False
    [session] = report["sessions"]
    assert len(session["withSecrets"]) == 3 and session["folders"] == 5
    assert session["files"] == {"recall-state.json": 2, "stats.jsonl": 1}  # block + entry
    assert set(session["kinds"]) >= {SECRETS[0].kind, SECRETS[1].kind}
    dumped = orjson.dumps(report)
    assert not [v for v in VALUES if v.encode() in dumped]
    assert len(leaks(root)) >= 3  # nothing changed


def test_apply_redacts_everything_and_the_backup_restores(root: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    code, report = run("--memory-root", str(root), "--apply", "--backup-dir", str(backup), "--json")
    assert code == 0, report
    [session] = report["sessions"]
    assert len(session["rewritten"]) == 3 and session["remaining"] == []
    assert session["atomic"] is rewrite.exchange_supported()
    assert set(session["filesRedacted"]) == {"recall-state.json", "stats.jsonl", SNAPSHOT_NAME}
    assert leaks(root) == []
    store = open_session(root, SID)
    assert store.load_report.clean, store.load_report  # the marker was folded in at apply
    assert len(store) == 5
    for entry in store.index:  # index rows are the metas'
        meta = store.get_meta(entry.id)
        assert (entry.title, entry.keywords) == (meta.title, meta.keywords)
        assert not scan_folder(store, entry.id).has_secrets
    clean = [e for e in store.index if "普通对话" in store.read_context(e.id)[0]["content"]]
    assert len(clean) == 2
    # the rewritten store passes selfcheck (no FAIL: exit 0)
    checked = io.StringIO()
    with contextlib.redirect_stdout(checked):
        code = main(
            ["selfcheck", "--memory-dir", str(root), "--sessions-dir", str(tmp_path / "logs")]
        )
    assert code == 0, checked.getvalue()
    assert "0 failed" in checked.getvalue()
    # idempotent: a second run finds nothing and writes no backup
    code, again = run("--memory-root", str(root), "--apply", "--json")
    assert again["foldersWithSecrets"] == 0 and again["backup"] is None
    # the backup holds the old session whole, and restores it
    assert leaks(backup)
    code, restored = run("--memory-root", str(root), "--restore", str(backup), "--json")
    assert code == 0 and len(restored["restored"]) == 1
    old = open_session(root, SID)
    assert len(old) == 5 and len(leaks(root)) >= 3


def _pairs(store: SessionStore) -> dict[str, tuple[Any, Any]]:
    return {
        e.id: (store.read_context(e.id), store.get_meta(e.id).model_dump()) for e in store.index
    }


def test_a_kill_at_any_step_leaves_each_folder_old_or_new(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    build_old_store(pristine)
    old_store = open_session(pristine, SID)
    old = _pairs(old_store)
    scans = [scan_folder(old_store, fid) for fid in old]
    new = {s.folder_id: (s.messages, s.meta) for s in scans if s.has_secrets}
    steps = 0
    outcomes: set[str] = set()
    saved_swap = rewrite.swap
    for fail_at in range(200):
        root = tmp_path / f"run-{fail_at}"
        shutil.copytree(pristine, root)
        store = open_session(root, SID)
        faulty = FaultyFs(fail_at, "crash")

        def counted(a: Path, b: Path, fs: FaultyFs = faulty, real: Any = saved_swap) -> bool:
            if fs._step():
                raise Injected("swap")
            ok: bool = real(a, b)
            return ok

        rewrite.swap = counted
        try:
            with using(faulty):
                rewrite.rewrite_folders(store.paths, [scan_folder(store, f) for f in old])
            done = True
        except Injected:
            done = False
        finally:
            rewrite.swap = saved_swap
        reopened = open_session(root, SID)
        now = _pairs(reopened)
        assert set(now) == set(old)
        for fid, pair in now.items():
            after = new.get(fid)
            expected_new = (
                (after[0], FolderMeta.model_validate(after[1]).model_dump()) if after else None
            )
            assert pair == old[fid] or pair == expected_new, (fail_at, fid)
            outcomes.add("old" if pair == old[fid] else "new")
            entry = reopened.get_entry(fid)
            assert entry.title == reopened.get_meta(fid).title
        assert not list(reopened.dir.glob(".staging-*"))
        shutil.rmtree(root)
        if done:
            steps = fail_at
            break
    assert steps > 10  # every step of the run was interrupted once
    assert outcomes == {"old", "new"}


def test_without_a_directory_exchange_files_are_replaced_one_by_one(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rewrite, "swap", lambda a, b: False)
    backup = tmp_path / "b"
    code, report = run("--memory-root", str(root), "--apply", "--backup-dir", str(backup), "--json")
    assert code == 0 and report["sessions"][0]["atomic"] is False
    assert report["sessions"][0]["remaining"] == [] and leaks(root) == []
    assert open_session(root, SID).load_report.clean
