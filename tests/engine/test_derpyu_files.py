"""The Derpyu autopatch on disk (reference §3.2.5): backup, atomic write, state with
sha256, idempotence, self-heal, rollbacks respected, at most five backups, and every
failure leaving the third-party file byte-identical."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import jsonio
from engine.compat.derpyu_files import (
    MAX_BACKUPS,
    STATE_KEY,
    STATE_NAME,
    TARGET,
    PatchOutcome,
    apply_autopatch,
)
from engine.compat.derpyu_patch import MARKER, PATCH_NAMES, patch_text
from engine.jsonio import FsOps, is_temp_name

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000

GUARD = """\
export const name = 'qq-tool-restrict'

const SAFE_EXACT = new Set([
  'ask_user_question',
  'todo_write',
])

export function allowed(name) {
  return SAFE_EXACT.has(name)
}
"""


def _upstream(version: int) -> str:
    """Another release of the guard: new content, still without rofmd's names."""
    return GUARD.replace("export const name", f"// release {version}\nexport const name")


def _profile(tmp_path: Path, text: str | bytes = GUARD) -> tuple[Path, Path]:
    profile = tmp_path / "profile"
    target = profile / TARGET
    target.parent.mkdir(parents=True)
    target.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return profile, target


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``directory``: bytes, mtime and mode."""
    out: dict[str, tuple[bytes, int, int]] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            out[str(path.relative_to(directory))] = (path.read_bytes(), st.st_mtime_ns, st.st_mode)
    return out


def _backups(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if ".bak-rofm-" in p.name)


def _state(memory: Path) -> dict[str, Any]:
    obj = orjson.loads((memory / STATE_NAME).read_bytes())
    assert isinstance(obj, dict)
    return obj


def _record(memory: Path, target: Path) -> dict[str, Any]:
    record = _state(memory)[STATE_KEY][os.path.realpath(target)]
    assert isinstance(record, dict)
    return record


def _no_temp_files(*dirs: Path) -> None:
    for d in dirs:
        if d.exists():
            assert [p.name for p in d.iterdir() if is_temp_name(p.name)] == []


def test_first_run_backs_up_patches_and_records(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + 999)
    backup = target.with_name("qq-tool-restrict.mjs.bak-rofm-20260101000000")
    assert outcome == PatchOutcome(True, "patched", str(target), None, str(backup))
    assert target.read_text(encoding="utf-8") == patch_text(GUARD).text
    assert backup.read_text(encoding="utf-8") == GUARD
    record = _record(memory, target)
    assert record["beforeSha256"] == _sha(backup)
    assert record["afterSha256"] == _sha(target)
    assert record["patchedAt"] == T0 + 999
    assert record["added"] == list(PATCH_NAMES)
    assert record["backup"] == str(backup)
    assert _state(memory)["version"] == 1
    _no_temp_files(target.parent, memory)


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + HOUR)
    assert outcome == PatchOutcome(True, "already", str(target))
    assert _snapshot(tmp_path) == before
    assert len(_backups(target)) == 1
    assert target.read_text(encoding="utf-8").count(MARKER) == 4


def test_a_file_that_has_the_names_already_is_not_touched(tmp_path: Path) -> None:
    profile, _ = _profile(tmp_path, patch_text(GUARD).text)
    memory = tmp_path / "memory"
    before = _snapshot(tmp_path)
    assert apply_autopatch(profile, memory, enabled=True, now_ms=T0).action == "already"
    assert _snapshot(tmp_path) == before
    assert not memory.exists()


def test_bytes_line_ends_bom_and_mode_survive(tmp_path: Path) -> None:
    src = "\ufeff" + GUARD.replace("'", '"').replace("\n", "\r\n")
    profile, target = _profile(tmp_path, src)
    target.chmod(0o640)
    outcome = apply_autopatch(profile, tmp_path / "memory", enabled=True, now_ms=T0)
    assert outcome.action == "patched"
    raw = target.read_bytes()
    assert raw == patch_text(src).text.encode("utf-8")
    assert raw.startswith(b"\xef\xbb\xbf")
    assert raw.count(b"\n") == raw.count(b"\r\n")
    assert f'"memory_group_recall", {MARKER}\r\n'.encode() in raw
    assert target.stat().st_mode & 0o777 == 0o640
    assert outcome.backup is not None
    assert Path(outcome.backup).stat().st_mode & 0o777 == 0o640


UNKNOWN = {
    "spread": GUARD.replace("  'todo_write',", "  ...BASE,"),
    "one line": GUARD.replace(
        "new Set([\n  'ask_user_question',\n  'todo_write',\n])", "new Set(['a'])"
    ),
    "two sets": GUARD + "const SAFE_EXACT = new Set([\n])\n",
    "no set": GUARD.replace("SAFE_EXACT", "SAFE_NAMES"),
}


@pytest.mark.parametrize(
    "src", [*UNKNOWN.values(), b"\xff\xfe not utf-8"], ids=[*UNKNOWN, "binary"]
)
def test_an_unknown_file_is_left_byte_identical(tmp_path: Path, src: str | bytes) -> None:
    profile, target = _profile(tmp_path, src)
    memory = tmp_path / "memory"
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert outcome.action == "unknown-structure"
    assert not outcome.active
    assert outcome.warning is not None and str(target) in outcome.warning
    assert _snapshot(tmp_path) == before
    assert not memory.exists()


def test_self_heal_after_an_upstream_update(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    target.write_text(_upstream(2), encoding="utf-8")  # npm replaced the package
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + HOUR)
    assert (outcome.active, outcome.action, outcome.warning) == (True, "healed", None)
    assert target.read_text(encoding="utf-8") == patch_text(_upstream(2)).text
    record = _record(memory, target)
    assert record["action"] == "healed"
    assert record["beforeSha256"] == hashlib.sha256(_upstream(2).encode()).hexdigest()
    assert record["afterSha256"] == _sha(target)
    assert outcome.backup is not None
    assert Path(outcome.backup).read_text(encoding="utf-8") == _upstream(2)
    assert len(_backups(target)) == 2


def test_at_most_five_backups_over_seven_heals_and_only_ours_are_pruned(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    foreign = [
        "qq-tool-restrict.mjs.bak",
        "qq-tool-restrict.mjs.bak-rofm-old",
        "other.mjs.bak-rofm-20200101000000",
    ]
    for name in foreign:
        (target.parent / name).write_text("not ours", encoding="utf-8")
    # Two heals in one second get distinct names; the clock going back does not prune the new one.
    times = [
        T0,
        T0 + HOUR,
        T0 + HOUR + 10,
        T0 + 2 * HOUR,
        T0 + 3 * HOUR,
        T0 + 4 * HOUR,
        T0 - HOUR,
        T0 + 5 * HOUR,
    ]
    for i, now in enumerate(times):
        if i:
            target.write_text(_upstream(i), encoding="utf-8")
        outcome = apply_autopatch(profile, memory, enabled=True, now_ms=now)
        assert outcome.action == ("patched" if i == 0 else "healed")
        ours = [n for n in _backups(target) if n.startswith("qq-tool-restrict.mjs.bak-rofm-2")]
        assert len(ours) <= MAX_BACKUPS
        assert outcome.backup is not None and Path(outcome.backup).name in ours
        assert _record(memory, target)["beforeSha256"] == _sha(Path(outcome.backup))
        if now == T0 - HOUR:  # written with a stamp older than the rest, and kept
            assert "qq-tool-restrict.mjs.bak-rofm-20251231230000" in ours
    assert ours == [
        "qq-tool-restrict.mjs.bak-rofm-20260101010000-2",
        "qq-tool-restrict.mjs.bak-rofm-20260101020000",
        "qq-tool-restrict.mjs.bak-rofm-20260101030000",
        "qq-tool-restrict.mjs.bak-rofm-20260101040000",
        "qq-tool-restrict.mjs.bak-rofm-20260101050000",
    ]
    for name in foreign:
        assert (target.parent / name).read_text(encoding="utf-8") == "not ours"


def test_two_patches_in_one_second_keep_both_backups(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    target.write_text(_upstream(1), encoding="utf-8")
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + 500)
    assert outcome.backup == str(target.with_name("qq-tool-restrict.mjs.bak-rofm-20260101000000-2"))
    assert Path(outcome.backup).read_text(encoding="utf-8") == _upstream(1)
    assert (
        target.with_name("qq-tool-restrict.mjs.bak-rofm-20260101000000").read_text(encoding="utf-8")
        == GUARD
    )


def test_a_backup_copied_back_stays_rolled_back_until_its_record_is_deleted(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    first = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert first.backup is not None
    shutil.copyfile(first.backup, target)  # rollback 1: cp <file>.bak-rofm-<stamp> <file>
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + HOUR)
    assert (outcome.active, outcome.action) == (False, "rolled-back")
    assert outcome.warning is not None and STATE_NAME in outcome.warning
    assert _snapshot(tmp_path) == before
    state = _state(memory)  # rollback 3: delete the record, and rofmd evaluates the file afresh
    del state[STATE_KEY][str(target)]
    (memory / STATE_NAME).write_bytes(orjson.dumps(state))
    again = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + 2 * HOUR)
    assert (again.active, again.action) == (True, "patched")
    assert target.read_text(encoding="utf-8") == patch_text(GUARD).text


@pytest.mark.parametrize("last_comma", [True, False])
def test_deleting_the_marked_lines_is_a_rollback_too(tmp_path: Path, last_comma: bool) -> None:
    src = GUARD if last_comma else GUARD.replace("'todo_write',", "'todo_write'")
    profile, target = _profile(tmp_path, src)
    memory = tmp_path / "memory"
    apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    kept = [
        line
        for line in target.read_text(encoding="utf-8").splitlines(keepends=True)
        if MARKER not in line
    ]
    target.write_text("".join(kept), encoding="utf-8")  # rollback 2, by hand
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0 + HOUR)
    assert (outcome.active, outcome.action) == (False, "rolled-back")
    assert _snapshot(tmp_path) == before


def test_a_symlinked_package_is_patched_through_the_link(tmp_path: Path) -> None:
    repo = tmp_path / "repo" / "plugins" / "qq-agent-presets"
    repo.mkdir(parents=True)
    real = repo / "qq-tool-restrict.mjs"
    real.write_text(GUARD, encoding="utf-8")
    profile = tmp_path / "profile"
    (profile / "node_modules").mkdir(parents=True)
    (profile / "node_modules" / "qq-agent-presets").symlink_to(repo, target_is_directory=True)
    memory = tmp_path / "memory"
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert (outcome.action, outcome.path) == ("patched", str(real))
    assert (profile / "node_modules" / "qq-agent-presets").is_symlink()
    assert real.read_text(encoding="utf-8") == patch_text(GUARD).text
    assert _backups(real) == ["qq-tool-restrict.mjs.bak-rofm-20260101000000"]
    record = _state(memory)[STATE_KEY][str(real)]
    assert record["path"] == str(real)
    assert record["profilePath"] == str(profile / TARGET)
    assert record["afterSha256"] == _sha(real)


def test_a_symlinked_file_is_replaced_at_its_target_and_the_link_kept(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.mjs"
    elsewhere.write_text(GUARD, encoding="utf-8")
    profile = tmp_path / "profile"
    (profile / TARGET).parent.mkdir(parents=True)
    (profile / TARGET).symlink_to(elsewhere)
    outcome = apply_autopatch(profile, tmp_path / "memory", enabled=True, now_ms=T0)
    assert outcome.path == str(elsewhere)
    assert (profile / TARGET).is_symlink()
    assert elsewhere.read_text(encoding="utf-8") == patch_text(GUARD).text


class _Refuse(FsOps):
    """Refuses to create files as a read-only filesystem does (EROFS), for everyone,
    root included: the tests run as root, which ignores permission bits, so a chmod 0555
    directory would not stop the write. ``only`` restricts it to names containing it."""

    def __init__(self, only: str = "") -> None:
        self.only = only

    def create_write_sync(self, path: Path, data: bytes) -> None:
        if self.only in path.name:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        super().create_write_sync(path, data)


def test_a_read_only_directory_leaves_everything_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    before = _snapshot(tmp_path)
    monkeypatch.setattr(jsonio, "fs", _Refuse())
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (False, "read-only")
    assert outcome.warning is not None and "Read-only file system" in outcome.warning
    assert _snapshot(tmp_path) == before
    assert not memory.exists()
    _no_temp_files(target.parent)


def test_a_failed_write_of_the_file_removes_its_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    before = _snapshot(tmp_path)
    refuse = _Refuse(only=".qq-tool-restrict.mjs.")  # the target's temp file, not the backup's
    monkeypatch.setattr(jsonio, "fs", refuse)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (False, "read-only")
    assert _snapshot(tmp_path) == before
    _no_temp_files(target.parent)


def test_a_read_only_file_is_not_replaced(tmp_path: Path) -> None:
    """chmod 0444 says "do not touch"; root could rename over it, so the mode is checked."""
    profile, target = _profile(tmp_path)
    target.chmod(0o444)
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, tmp_path / "memory", enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (False, "read-only")
    assert outcome.warning is not None and "read-only" in outcome.warning
    assert _snapshot(tmp_path) == before


def test_a_file_changed_while_patching_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, target = _profile(tmp_path)

    class _Installer(FsOps):
        """npm rewrites the file while the backup is being written."""

        def create_write_sync(self, path: Path, data: bytes) -> None:
            super().create_write_sync(path, data)
            if "bak-rofm" in path.name:
                target.write_text(_upstream(9), encoding="utf-8")

    installer = _Installer()
    monkeypatch.setattr(jsonio, "fs", installer)
    outcome = apply_autopatch(profile, tmp_path / "memory", enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (False, "error")
    assert target.read_text(encoding="utf-8") == _upstream(9)
    assert _backups(target) == []


def test_disabled_reads_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, _ = _profile(tmp_path)
    memory = tmp_path / "memory"
    before = _snapshot(tmp_path)

    def _no(*_args: object, **_kwargs: object) -> Any:
        raise AssertionError("disabled must not look at the file")

    monkeypatch.setattr("engine.compat.derpyu_files.os.path.realpath", _no)
    monkeypatch.setattr("engine.compat.derpyu_files.patch_text", _no)
    outcome = apply_autopatch(profile, memory, enabled=False, now_ms=T0)
    assert outcome == PatchOutcome(False, "disabled", None)
    assert _snapshot(tmp_path) == before
    assert not memory.exists()


def test_a_missing_file_is_reported_not_created(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    outcome = apply_autopatch(profile, tmp_path / "memory", enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action, outcome.path) == (
        False,
        "missing",
        str(profile / TARGET),
    )
    assert outcome.warning is not None
    assert sorted(tmp_path.rglob("*")) == [profile]


def test_an_unwritable_state_is_a_warning_and_the_patch_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    monkeypatch.setattr(jsonio, "fs", _Refuse(only=STATE_NAME))
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (True, "patched")
    assert outcome.warning is not None and "could not record" in outcome.warning
    assert target.read_text(encoding="utf-8") == patch_text(GUARD).text
    assert not (memory / STATE_NAME).exists()


def test_an_unreadable_state_leaves_the_file_alone(tmp_path: Path) -> None:
    """Without the state a rollback cannot be told from an update: nothing is written."""
    profile, _ = _profile(tmp_path)
    memory = tmp_path / "memory"
    memory.write_text("a file where the memory directory should be", encoding="utf-8")
    before = _snapshot(tmp_path)
    outcome = apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    assert (outcome.active, outcome.action) == (False, "error")
    assert outcome.warning is not None
    assert _snapshot(tmp_path) == before


def test_other_state_is_kept_and_a_damaged_state_is_replaced(tmp_path: Path) -> None:
    profile, target = _profile(tmp_path)
    memory = tmp_path / "memory"
    memory.mkdir()
    other = {"path": "/elsewhere/qq-tool-restrict.mjs", "afterSha256": "0" * 64}
    (memory / STATE_NAME).write_bytes(
        orjson.dumps({"detect": {"x": 1}, STATE_KEY: {other["path"]: other}})
    )
    apply_autopatch(profile, memory, enabled=True, now_ms=T0)
    state = _state(memory)
    assert state["detect"] == {"x": 1}
    assert state[STATE_KEY][other["path"]] == other
    assert str(target) in state[STATE_KEY]

    profile2, target2 = _profile(tmp_path / "second")
    (memory / STATE_NAME).write_text("{ torn", encoding="utf-8")
    assert apply_autopatch(profile2, memory, enabled=True, now_ms=T0).action == "patched"
    assert list(_state(memory)[STATE_KEY]) == [str(target2)]
