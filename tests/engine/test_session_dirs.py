"""Issue 18: distinct session ids never share a directory; old stores are migrated.

The old mapping replaced unsafe characters by `_`, so `chat/a` and `chat_a`,
`team:dev` and `team@dev`, `会话一` and `对话二` shared one directory (a recall in
one returned the other's memories). Now the name is an injective encoding, the
directory records its id (`session.json`, checked on open), and a store named by
the old mapping is adopted or renamed in place, crash-safely.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
import threading
import unicodedata
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from engine.jsonio import FsOps, is_temp_name, read_json, write_json_atomic
from engine.store import (
    FolderMeta,
    SessionDirError,
    SessionPaths,
    SessionStore,
    find_session_dir,
    list_session_dirs,
    make_idempotency_key,
    open_session,
    safe_session_id,
)
from engine.store.ids import (
    DIGEST_HEX,
    MAX_NAME_LENGTH,
    PREFIX_LENGTH,
    is_session_dir_name,
    legacy_session_dir_name,
    previous_session_dir_name,
)
from engine.store.session_dirs import SESSION_FILE, owner_of, session_dir_exists
from tests.cli_env import isolate_cli
from tests.engine.test_store_crash import using

NOW = 1_767_225_600_000

ISSUE_PAIRS = [("chat/a", "chat_a"), ("team:dev", "team@dev"), ("会话一", "对话二")]

# Characters the old mapping folded together, plus case and normalisation variants, and
# the line break `$` matched before.
TRICKY = st.text(
    alphabet=st.sampled_from(list("aAbB_-./:@~ 会话一对二éé\x00\\\n")), min_size=1, max_size=12
)
IDS = st.one_of(TRICKY, st.text(min_size=1, max_size=200))


def _valid(raw: str) -> bool:
    return raw.strip(".") != ""


# ---- the encoding --------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(ids=st.lists(IDS, min_size=2, max_size=30, unique=True))
def test_no_two_distinct_ids_share_a_directory_name(ids: list[str]) -> None:
    ids = [i for i in ids if _valid(i)]
    names = [safe_session_id(i) for i in ids]
    assert len(set(names)) == len(ids)
    # also on case-insensitive file systems (macOS, Windows); names are ASCII, so
    # Unicode normalisation by the file system cannot merge them either
    assert len({n.casefold() for n in names}) == len(ids)
    for n in names:
        assert n.isascii() and n == unicodedata.normalize("NFC", n)
        assert is_session_dir_name(n) and len(n) <= MAX_NAME_LENGTH
        assert not n.startswith((".", "~")) and "/" not in n and "\\" not in n
        assert n.isprintable()


def test_the_strategy_reaches_ids_the_old_mapping_merged() -> None:
    a, b = find(
        st.tuples(TRICKY, TRICKY),
        lambda p: (
            p[0] != p[1]
            and _valid(p[0])
            and _valid(p[1])
            and legacy_session_dir_name(p[0]) == legacy_session_dir_name(p[1])
        ),
    )
    assert safe_session_id(a) != safe_session_id(b)


@settings(max_examples=300, deadline=None)
@given(raw=IDS)
def test_encoding_is_readable_where_safe(raw: str) -> None:
    if not _valid(raw):
        with pytest.raises(ValueError, match="session id"):
            safe_session_id(raw)
        return
    name = safe_session_id(raw)
    if "~" not in name:
        assert name == raw  # readable: the id itself
    else:
        prefix, digest = name.rsplit("~", 1)
        hint = re.sub(r"[^A-Za-z0-9._-]+", "_", raw).lstrip(".")[:PREFIX_LENGTH]
        assert prefix == (hint or "_")
        assert digest == hashlib.sha256(raw.encode()).hexdigest()[:DIGEST_HEX]


def test_readable_and_encoded_examples() -> None:
    assert safe_session_id("session-8f2c") == "session-8f2c"
    assert safe_session_id("onebot-group-12345") == "onebot-group-12345"
    assert safe_session_id("chat/a").startswith("chat_a~")
    assert safe_session_id("Chat").startswith("Chat~")  # `chat` on macOS otherwise
    assert safe_session_id("Chat") != safe_session_id("chat") == "chat"
    assert safe_session_id("会话一").startswith("_~")
    assert safe_session_id("会话一") != safe_session_id("对话二")
    long = "x" * 500
    assert len(safe_session_id(long)) <= MAX_NAME_LENGTH


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ids=st.lists(IDS, min_size=2, max_size=8, unique=True))
def test_distinct_ids_get_distinct_stores_on_disk(ids: list[str]) -> None:
    ids = [i for i in ids if _valid(i)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dirs = {}
        for sid in ids:
            store = open_session(root, sid)
            _commit(store, [(sid, 1)])
            dirs[sid] = store.dir
        assert len(set(dirs.values())) == len(ids)
        for sid in ids:
            again = open_session(root, sid)
            assert again.dir == dirs[sid]
            assert read_json(again.dir / SESSION_FILE)["id"] == sid
            assert _users_in(again) == [sid]  # nobody else's memories


# ---- helpers -------------------------------------------------------------------------


def _commit(store: SessionStore, users: list[tuple[str, int]]) -> list[str]:
    """One folder per (session id, minute); the key names its session like the archiver."""
    ids = []
    with store.transaction(f"arc-{len(store)}-{len(users)}", keep_record=False) as txn:
        for sid, minute in users:
            at = NOW + minute * 60_000
            meta = FolderMeta(
                id=store.new_folder_id(at),
                createdAt=at,
                scored=False,
                title=f"{sid} @ {minute}",
                idempotencyKey=make_idempotency_key(sid, minute, 1, 2, "h", 0),
            )
            txn.add_folder(meta, [{"role": "user", "content": meta.title}])
            ids.append(meta.id)
    return ids


def _users_in(store: SessionStore) -> list[str]:
    return sorted({orjson.loads(e.idempotencyKey or "[]")[0] for e in store.index})


def _legacy_store(root: Path, name: str, users: list[tuple[str, int]]) -> Path:
    """A store as the old code wrote it: at `name`, no session.json."""
    resolved = root.resolve()
    paths = SessionPaths(root=resolved, dir=resolved / "sessions" / name)
    store = SessionStore(paths, users[0][0] if users else name)
    if users:
        _commit(store, users)
    store.paths.recall_state.write_bytes(b'{"version": 3}\n')
    assert not (paths.dir / SESSION_FILE).exists()
    return paths.dir


def _layout(root: Path) -> dict[str, tuple[str | None, list[str]]]:
    """name → (recorded id, session ids of its folders), for every session directory."""
    out: dict[str, tuple[str | None, list[str]]] = {}
    for d in sorted((root / "sessions").iterdir()):
        rec = d / SESSION_FILE
        sid = read_json(rec)["id"] if rec.exists() else None
        index = d / "index.json"
        rows = read_json(index)["folders"] if index.exists() else []
        out[d.name] = (sid, sorted({orjson.loads(r["idempotencyKey"])[0] for r in rows}))
    return out


# ---- the issue's examples ------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), ISSUE_PAIRS)
def test_issue_pairs_no_longer_share_memories(tmp_path: Path, a: str, b: str) -> None:
    assert legacy_session_dir_name(a) == legacy_session_dir_name(b)  # the bug
    sa, sb = open_session(tmp_path, a), open_session(tmp_path, b)
    assert sa.dir != sb.dir
    _commit(sa, [(a, 1)])
    assert len(open_session(tmp_path, b)) == 0
    _commit(sb, [(b, 2)])
    assert _users_in(open_session(tmp_path, a)) == [a]
    assert _users_in(open_session(tmp_path, b)) == [b]


# ---- the record, checked on open -----------------------------------------------------


def test_record_is_written_and_checked(tmp_path: Path) -> None:
    store = open_session(tmp_path, "chat/a")
    assert store.dir_outcome is not None and store.dir_outcome.action == "created"
    assert read_json(store.dir / SESSION_FILE) == {"version": 1, "id": "chat/a"}
    assert open_session(tmp_path, "chat/a").dir_outcome.action == "ok"  # type: ignore[union-attr]
    write_json_atomic(store.dir / SESSION_FILE, {"version": 1, "id": "someone else"})
    with pytest.raises(SessionDirError, match="belongs to session 'someone else'"):
        open_session(tmp_path, "chat/a")


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"version": 1}', b"[]"])
def test_unreadable_record_is_an_error(tmp_path: Path, content: bytes) -> None:
    store = open_session(tmp_path, "s1")
    (store.dir / SESSION_FILE).write_bytes(content)
    with pytest.raises(SessionDirError, match=SESSION_FILE):
        open_session(tmp_path, "s1")


def test_a_file_in_place_of_the_directory_is_enotdir(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / safe_session_id("x/y")).write_text("")
    with pytest.raises(NotADirectoryError):
        open_session(tmp_path, "x/y")


def test_global_layout_is_unchanged(tmp_path: Path) -> None:
    store = open_session(tmp_path, "a/b", per_session=False)
    assert store.dir == tmp_path.resolve() and store.dir_outcome is None
    assert not (tmp_path / SESSION_FILE).exists()


# ---- migration -----------------------------------------------------------------------


@pytest.mark.parametrize("sid", ["chat/a", "Chat", "会话一", "x" * 300, ".hidden"])
def test_old_store_of_one_id_is_renamed_in_place(tmp_path: Path, sid: str) -> None:
    old = _legacy_store(tmp_path, legacy_session_dir_name(sid), [(sid, 1), (sid, 2)])
    folders = sorted(p.name for p in old.iterdir() if p.name.startswith("mem-"))
    store = open_session(tmp_path, sid)
    assert store.dir_outcome is not None and store.dir_outcome.action == "migrated"
    assert store.dir.name == safe_session_id(sid) != old.name
    assert not old.exists()
    assert sorted(e.id for e in store.index) == folders
    assert store.paths.recall_state.read_bytes() == b'{"version": 3}\n'
    assert read_json(store.dir / SESSION_FILE) == {
        "version": 1,
        "id": sid,
        "migratedFrom": old.name,
        "owner": "idempotencyKey",
    }
    assert store.load_report.clean
    assert open_session(tmp_path, sid).dir_outcome.action == "ok"  # type: ignore[union-attr]


@pytest.mark.parametrize("users", [[("chat_a", 1)], []])
def test_old_store_at_the_new_name_is_adopted(tmp_path: Path, users: Any) -> None:
    old = _legacy_store(tmp_path, "chat_a", users)
    store = open_session(tmp_path, "chat_a")
    assert store.dir == old.resolve()
    assert store.dir_outcome is not None and store.dir_outcome.action == "adopted"
    assert read_json(old / SESSION_FILE)["id"] == "chat_a"
    # the other id that mapped there before gets its own, empty store
    other = open_session(tmp_path, "chat/a")
    assert other.dir != store.dir and len(other) == 0


def test_old_store_without_folders_goes_by_its_name(tmp_path: Path) -> None:
    _legacy_store(tmp_path, "chat_a", [])
    # `chat/a` opens first, but nothing says the store was its: the name is an id
    assert len(open_session(tmp_path, "chat/a")) == 0
    assert read_json(tmp_path / "sessions" / "chat_a" / SESSION_FILE) == {
        "version": 1,
        "id": "chat_a",
        "owner": "name",
    }
    store = open_session(tmp_path, "chat_a")
    assert store.dir.name == "chat_a" and store.paths.recall_state.exists()


def test_old_store_without_folders_nor_readable_name_goes_to_first_opener(tmp_path: Path) -> None:
    _legacy_store(tmp_path, "Team_dev", [])
    first = open_session(tmp_path, "Team:dev")
    assert first.dir_outcome is not None and first.dir_outcome.action == "migrated"
    assert first.dir_outcome.owner == "first-open"
    second = open_session(tmp_path, "Team@dev")
    assert second.dir_outcome is not None and second.dir_outcome.action == "created"


@pytest.mark.parametrize("order", [("chat/a", "chat_a"), ("chat_a", "chat/a")])
def test_shared_old_store_goes_whole_to_its_first_user(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    """The bug's directory: `chat/a` archived first, then `chat_a` wrote into it too."""
    _legacy_store(tmp_path, "chat_a", [("chat/a", 1), ("chat_a", 5), ("chat/a", 9)])
    for sid in order:
        open_session(tmp_path, sid)
    first, second = safe_session_id("chat/a"), "chat_a"
    # the same result whichever opens first
    assert _layout(tmp_path) == {
        first: ("chat/a", ["chat/a", "chat_a"]),  # cannot be split: kept whole
        second: ("chat_a", []),  # starts empty
    }
    rec = read_json(tmp_path / "sessions" / first / SESSION_FILE)
    assert rec["sharedWith"] == ["chat_a"] and rec["migratedFrom"] == "chat_a"
    again = open_session(tmp_path, "chat_a")
    assert again.dir_outcome is not None and again.dir_outcome.action == "ok"


def test_shared_old_store_stays_when_its_first_user_owns_the_name(tmp_path: Path) -> None:
    _legacy_store(tmp_path, "chat_a", [("chat_a", 1), ("chat/a", 5)])
    assert len(open_session(tmp_path, "chat/a")) == 0
    assert _layout(tmp_path)["chat_a"][0] == "chat_a"  # decision recorded at once
    assert len(open_session(tmp_path, "chat_a")) == 2


@pytest.mark.parametrize("order", [("会话一", "对话二"), ("对话二", "会话一")])
def test_shared_cjk_store(tmp_path: Path, order: tuple[str, str]) -> None:
    _legacy_store(tmp_path, "___", [("对话二", 1), ("会话一", 2)])
    stores = {sid: open_session(tmp_path, sid) for sid in order}
    assert len(stores["对话二"]) == 2 and len(stores["会话一"]) == 0
    assert not (tmp_path / "sessions" / "___").exists()


def test_record_of_another_id_at_a_digest_name_is_a_mismatch(tmp_path: Path) -> None:
    name = safe_session_id("chat/a")
    (tmp_path / "sessions" / name).mkdir(parents=True)
    write_json_atomic(tmp_path / "sessions" / name / SESSION_FILE, {"version": 1, "id": "x/y"})
    with pytest.raises(SessionDirError, match="belongs to session 'x/y'"):
        open_session(tmp_path, "chat/a")


def test_find_and_list_read_only(tmp_path: Path) -> None:
    _legacy_store(tmp_path, "chat_a", [("chat/a", 1), ("chat_a", 2)])
    _legacy_store(tmp_path, "team_dev", [])
    base = tmp_path / "sessions"
    before = _layout(tmp_path)
    assert find_session_dir(base, "chat/a") == base / "chat_a"
    assert find_session_dir(base, "chat_a") is None
    assert find_session_dir(base, "team_dev") == base / "team_dev"
    assert find_session_dir(base, "team:dev") is None
    listed = {(d.name, d.id, d.how) for d in list_session_dirs(base)}
    assert listed == {("chat_a", "chat/a", "idempotencyKey"), ("team_dev", "team_dev", "name")}
    assert _layout(tmp_path) == before  # nothing written
    open_session(tmp_path, "chat/a")
    assert find_session_dir(base, "chat/a") == base / safe_session_id("chat/a")


def test_concurrent_opens_of_a_shared_store_agree(tmp_path: Path) -> None:
    _legacy_store(tmp_path, "chat_a", [("chat/a", 1), ("chat_a", 2)])
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def opener(sid: str) -> None:
        barrier.wait()
        try:
            open_session(tmp_path, sid)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener, args=(s,)) for s in ["chat/a", "chat_a"] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _layout(tmp_path) == {
        safe_session_id("chat/a"): ("chat/a", ["chat/a", "chat_a"]),
        "chat_a": ("chat_a", []),
    }


# ---- crash safety: interrupt the migration at every file system step ----------------


class Crash(OSError):
    """The injected failure: this and every later operation fail (process gone)."""


class CrashingFs(FsOps):
    def __init__(self, fail_at: int | None) -> None:
        self.count = 0
        self.fail_at = fail_at

    def _step(self, what: str) -> None:
        n, self.count = self.count, self.count + 1
        if self.fail_at is not None and n >= self.fail_at:
            raise Crash(what)

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if self.fail_at is not None and self.count == self.fail_at:
            path.write_bytes(data[: len(data) // 2])  # torn temp file
        self._step(f"create {path.name}")
        path.write_bytes(data)

    def append_sync(self, path: Path, data: bytes) -> None:
        self._step("append")
        with path.open("ab") as fh:
            fh.write(data)

    def replace(self, src: Path, dst: Path) -> None:
        self._step(f"replace {dst.name}")
        super().replace(src, dst)

    def rename(self, src: Path, dst: Path) -> None:
        self._step(f"rename {dst.name}")
        super().rename(src, dst)

    def fsync_dir(self, path: Path) -> None:
        self._step("fsync")

    def mkdir(self, path: Path) -> None:
        self._step("mkdir")
        super().mkdir(path)

    def unlink(self, path: Path) -> None:
        self._step(f"unlink {path.name}")
        super().unlink(path)

    def rmtree(self, path: Path) -> None:
        self._step(f"rmtree {path.name}")
        super().rmtree(path)


SCENARIOS: dict[str, tuple[str, list[tuple[str, int]], list[str]]] = {
    # old name, folders' users, ids opening (the first one is interrupted)
    "rename": ("chat_a", [("chat/a", 1)], ["chat/a", "chat_a"]),
    "adopt": ("chat_a", [("chat_a", 1)], ["chat_a", "chat/a"]),
    "move-away": ("chat_a", [("chat/a", 1), ("chat_a", 2)], ["chat_a", "chat/a"]),
    "move-away-other-first": ("chat_a", [("chat/a", 1), ("chat_a", 2)], ["chat/a", "chat_a"]),
    "shared-cjk": ("___", [("对话二", 1), ("会话一", 2)], ["会话一", "对话二"]),
    # the name before whole-id patterns: the id, its final line break included
    "previous-name": ("chat\n", [("chat\n", 1)], ["chat\n", "chat"]),
}


def _final(root: Path, opening: list[str]) -> dict[str, Any]:
    for sid in opening:
        store = open_session(root, sid)
        assert not store.load_report.corrupt_folders
    for p in (root / "sessions").rglob("*"):
        assert not is_temp_name(p.name), p
    return _layout(root)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_migration_interrupted_at_every_step_completes_on_next_open(scenario: str) -> None:
    old, users, opening = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _legacy_store(root, old, users)
        counter = CrashingFs(None)
        with using(counter):
            open_session(root, opening[0])
        total = counter.count
        expected = _final(root, opening)
    assert total >= 3
    assert sum(len(users) for _, users in expected.values()) == len({u for u, _ in users})
    for fail_at in range(total):
        for reopen in (opening, list(reversed(opening))):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                _legacy_store(root, old, users)
                with using(CrashingFs(fail_at)), pytest.raises(Crash):
                    open_session(root, opening[0])
                assert _final(root, reopen) == expected, (fail_at, reopen)


# ---- every caller uses the same mapping ----------------------------------------------


def test_daemon_registry_keys_are_the_directory_names() -> None:
    from handlers.sessions import SessionRegistry

    reg = SessionRegistry(lambda: Path("/unused"), lambda: True)
    keys = {reg.key_for(a) for pair in ISSUE_PAIRS for a in pair}
    assert len(keys) == 2 * len(ISSUE_PAIRS)
    assert reg.key_for("chat/a") == safe_session_id("chat/a")


def test_engine_cli_list_names_sessions_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rofmd.cli.engine_cli import add_engine_parser

    root = isolate_cli(monkeypatch, tmp_path)
    _legacy_store(root, "chat_a", [("chat/a", 1)])
    _commit(open_session(root, "会话一"), [("会话一", 1)])

    def run(*argv: str) -> Any:
        parser = argparse.ArgumentParser(prog="rofmd")
        add_engine_parser(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(["engine", *argv, "--memory-root", str(root), "--json"])
        assert args.func(args) == 0
        return orjson.loads(capsys.readouterr().out)

    listed = run("list")
    assert sorted((s["session"], len(s["folders"])) for s in listed["sessions"]) == [
        ("chat/a", 1),
        ("会话一", 1),
    ]
    assert not (root / "sessions" / "chat_a" / SESSION_FILE).exists()  # listing moved nothing
    one = run("list", "--session", "chat/a")
    assert [s["session"] for s in one["sessions"]] == ["chat/a"]
    assert run("list", "--session", "chat_a")["sessions"] == []
    assert run("report", "--session", "会话一")["sessions"] == ["会话一"]
    # opening by id (init) migrates
    run("init", "--session", "chat/a")
    assert owner_of(root / "sessions" / safe_session_id("chat/a")).how == "recorded"


# ---- the previous name: an id ending in a line break -----------------------------------


def _previous_store(root: Path, sid: str, *, recorded: bool) -> Path:
    """A store as the mapping before whole-id patterns wrote it: at the id itself (a
    final line break included), with its record or (older) without."""
    name = previous_session_dir_name(sid)
    assert name is not None
    resolved = root.resolve()
    paths = SessionPaths(root=resolved, dir=resolved / "sessions" / name)
    store = SessionStore(paths, sid)
    _commit(store, [(sid, 1), (sid, 2)])
    if recorded:
        write_json_atomic(paths.dir / SESSION_FILE, {"version": 1, "id": sid})
    return paths.dir


@pytest.mark.parametrize("recorded", [True, False])
def test_a_store_at_its_previous_name_is_found_then_renamed_on_open(
    tmp_path: Path, recorded: bool
) -> None:
    sid = "onebot-group-1\n"
    old = _previous_store(tmp_path, sid, recorded=recorded)
    folders = sorted(p.name for p in old.iterdir() if p.name.startswith("mem-"))
    base = tmp_path / "sessions"
    before = _layout(tmp_path)
    assert find_session_dir(base, sid) == old
    assert session_dir_exists(base, sid)
    assert {(d.name, d.id) for d in list_session_dirs(base)} == {(old.name, sid)}
    assert _layout(tmp_path) == before  # finding and listing write nothing
    store = open_session(tmp_path, sid)
    assert store.dir_outcome is not None and store.dir_outcome.action == "migrated"
    assert store.dir_outcome.migrated_from == old.name
    assert store.dir.name == safe_session_id(sid) and "\n" not in store.dir.name
    assert not old.exists()
    assert sorted(e.id for e in store.index) == folders
    assert read_json(store.dir / SESSION_FILE)["id"] == sid
    assert store.load_report.clean
    assert open_session(tmp_path, sid).dir_outcome.action == "ok"  # type: ignore[union-attr]


def test_the_look_alike_of_a_store_at_its_previous_name_keeps_its_own(tmp_path: Path) -> None:
    """`onebot-group-1` and `onebot-group-1` followed by a line break are two sessions:
    before and after the rename, each opens its own folders only."""
    real = open_session(tmp_path, "onebot-group-1")
    mine = _commit(real, [("onebot-group-1", 5)])
    _previous_store(tmp_path, "onebot-group-1\n", recorded=True)
    again = open_session(tmp_path, "onebot-group-1")
    assert [e.id for e in again.index] == mine
    other = open_session(tmp_path, "onebot-group-1\n")
    assert other.dir != again.dir and len(other) == 2
    assert _users_in(other) == ["onebot-group-1\n"]
    assert [e.id for e in open_session(tmp_path, "onebot-group-1").index] == mine
