"""QQ channel compatibility through a real daemon (issue 14, reference §3.2.1–§3.2.4,
§3.2.8): detection from the DSH profile, chat-key folding, the onebot trigger kind,
member gating of automatic recall and memory_recall, Derpyu's heuristic scoring while
its whitelist is unpatched, and the channel rule. Media, the autopatch and
memory_group_recall have their own modules."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import texts
from engine.store.layout import session_dir_paths
from engine.store.readonly import read_store
from tests.archive_fixtures import Surface, floored_params
from tests.e2e.client import Client
from tests.e2e.harness import DaemonProcess, running_daemon

HEX_A = "0123456789abcdef" * 2
HEX_B = "fedcba9876543210" * 2
OWNER = "88888"
MEMBER = "10001"
PORT_LINE = "部署端口约定：生产环境统一用 8443 端口，测试环境用 9443。"


def _filler(s: Surface, i: int, size: int = 300) -> None:
    s.user(f"第{i}个问题：请帮我看看配置文件。" + "内容" * (size // 2))
    s.assistant(f"第{i}个回答：配置没问题。" + "好的" * (size // 2))


def archive(c: Client, sid: str, line: str = PORT_LINE) -> list[str]:
    """Archive a conversation whose first folder holds ``line``; commit it."""
    s = Surface()
    s.system()
    s.user(line)
    s.assistant("好的，记下了。")
    for i in range(60):
        _filler(s, i)
    comp = c.call("agent/pre-step", floored_params(s, sid))["compaction"]
    assert comp is not None
    assert c.call("archive/commit", {"session": {"id": sid}, "token": comp["token"]})["ok"]
    return list(comp["folders"])


def judge_low(c: Client, sid: str, folders: list[str], alpha: float) -> None:
    """Score every folder: the first (the port) with ``alpha``, the rest as filler."""
    updates = [
        {"id": fid, "alpha": alpha if i == 0 else 0.2, "beta": 2, "reason": "测试"}
        | {
            "keywords": ["部署端口", "8443", "生产环境"]
            if i == 0
            else ["配置文件", f"问题{i}", "读取"]
        }
        for i, fid in enumerate(folders)
    ]
    res = c.tool(sid, "memory_judge", {"updates": updates})
    assert res["isError"] is False, res
    assert f"已更新 {len(folders)} 条" in res["content"][0]["text"], res


def say(c: Client, sid: str, text: str, kind: str = "plugin:dsh-onebot") -> Any:
    return c.ask(sid, text, kind=kind)


def rules_text(c: Client, sid: str) -> str:
    sections = c.call("prompt/sections", {"session": {"id": sid}})["sections"]
    return str(next(s["text"] for s in sections if s["name"] == "dsh-rofm:memory-rules"))


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    config = {"compat": {"qqBots": "on", "ownerIds": [OWNER], "memberMinAlpha": 0.5}}
    with running_daemon(config=config) as d:
        yield d


def test_rebuilt_qqb_sessions_share_one_memory(daemon: DaemonProcess) -> None:
    c = Client(daemon)
    first, second = f"qqb-g-987654-{HEX_A}", f"qqb-g-987654-{HEX_B}"
    folders = archive(c, first)
    judge_low(c, first, folders, 0.8)
    names = sorted(p.name for p in (daemon.memory_root / "sessions").iterdir())
    assert "qqb-g-987654" in names and not any(n.startswith("qqb-g-987654-") for n in names)
    # /reset rebuilt the session under a new hex id: the same memory answers
    found = c.recall(second, keywords=["部署端口"])
    assert found["isError"] is False and folders[0] in json.dumps(found["value"]), found
    # a look-alike (31 hex digits) is another chat, with a memory of its own
    other = c.recall(f"qqb-g-987654-{HEX_A[:31]}", keywords=["部署端口"])
    assert folders[0] not in json.dumps(other["value"])
    c.close()


def test_member_gating_holds_for_automatic_recall_and_the_tool(daemon: DaemonProcess) -> None:
    c = Client(daemon)
    sid = "onebot-group-42"
    folders = archive(c, sid)
    judge_low(c, sid, folders, 0.3)
    member = say(
        c, sid, f'<user_message qq="{MEMBER}" nickname="阿明">部署端口是多少</user_message>'
    )
    assert folders[0] not in member["recalled"], member
    # in the same turn the model asking by itself cannot bypass the gate
    asked = c.recall(sid, keywords=["部署端口", "8443"])
    assert folders[0] not in json.dumps(asked["value"]), asked
    prefixed = say(c, sid, f"[21:05 阿明({MEMBER})] 部署端口是多少？")
    assert folders[0] not in prefixed["recalled"]
    owner = say(c, sid, f'<user_message qq="{OWNER}" nickname="主人">部署端口是多少</user_message>')
    assert folders[0] in owner["recalled"], owner
    c.close()


def test_unmarked_and_private_messages_count_as_the_owner(daemon: DaemonProcess) -> None:
    c = Client(daemon)
    sid = "onebot-private-10001-mk3f0a1b"  # a rebuilt private chat: folded, not gated
    folders = archive(c, sid)
    judge_low(c, sid, folders, 0.3)
    assert (daemon.memory_root / "sessions" / "onebot-private-10001").is_dir()
    answer = say(c, sid, f'<user_message qq="{MEMBER}">部署端口是多少</user_message>')
    assert folders[0] in answer["recalled"], answer
    c.close()


def test_channel_rule_and_derpyu_heuristic_scoring(daemon: DaemonProcess) -> None:
    c = Client(daemon)
    body = texts.RULES_CHANNEL[1]
    assert body in rules_text(c, "onebot-group-77")
    assert body not in rules_text(c, "session-plain-1")
    # Derpyu's whitelist is not patched (no profile setting): its folders are scored
    # heuristically; a onebot chat's wait for the model
    qqb = archive(c, "qqb-p-5")
    onebot = archive(c, "onebot-group-78")
    rules_text(c, "qqb-p-5")
    rules_text(c, "onebot-group-78")

    def modes(key: str) -> set[tuple[bool, str | None]]:
        rows = read_store(session_dir_paths(daemon.memory_root, key), key).index
        return {(e.scored, e.scoreMode) for e in rows}

    assert qqb and modes("qqb-p-5") == {(True, "heuristic")}
    assert onebot and modes("onebot-group-78") == {(False, "model")}
    status = c.call("status", {})
    assert status["compat"]["active"] is True
    assert status["compat"]["derpyuPatched"] is False
    c.close()


def _write_profile(profile: Path, deps: dict[str, str]) -> None:
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "package.json").write_text(json.dumps({"dependencies": deps}), encoding="utf-8")


def _wait_log(d: DaemonProcess, needle: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = d.log_path.read_text(encoding="utf-8", errors="replace")
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not logged")


def test_auto_detects_from_the_profile_and_follows_it(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    _write_profile(profile, {"dsh-onebot-qq": "^0.9.6"})
    with running_daemon(env={"DSH_PROFILE_DIR": str(profile)}) as d:
        c = Client(d)
        _wait_log(d, "dsh-rofm: compat enabled (dsh-onebot-qq)")
        assert c.call("status", {})["compat"]["plugins"] == ["dsh-onebot-qq"]
        stores = {}
        for sid in ("onebot-group-9", "onebot-group-10"):
            stores[sid] = archive(c, sid)
            judge_low(c, sid, stores[sid], 0.8)
        # plugin:dsh-onebot triggers recall without any config edit (§3.2.3)
        first = stores["onebot-group-9"][0]
        assert first in say(c, "onebot-group-9", "部署端口是多少")["recalled"]
        # the plugin is uninstalled; a config save re-detects at once
        _write_profile(profile, {})
        c.configure({})
        assert c.call("status", {})["compat"]["active"] is False
        assert say(c, "onebot-group-10", "部署端口是多少")["recalled"] == []
        second = stores["onebot-group-10"][0]
        assert second in say(c, "onebot-group-10", "部署端口是多少", kind="user")["recalled"]
        c.close()


def test_qqbots_off_and_no_plugins_behave_as_before(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    _write_profile(profile, {"dsh-onebot-qq": "1"})
    env = {"DSH_PROFILE_DIR": str(profile)}
    with running_daemon(env=env, config={"compat": {"qqBots": "off"}}) as d:
        c = Client(d)
        sid = f"qqb-g-1-{HEX_A}"
        archive(c, sid)
        assert (d.memory_root / "sessions" / sid).is_dir()  # the id is used as it is
        assert c.call("status", {})["compat"]["active"] is False
        assert texts.RULES_CHANNEL[1] not in rules_text(c, "onebot-group-1")
        c.close()


GUARD = """\
const SAFE_EXACT = new Set([
  'ask_user_question',
  'todo_write',
])
export function allowed(name) {
  return SAFE_EXACT.has(name)
}
"""


def _derpyu_profile(base: Path, guard: str) -> Path:
    profile = base / "profile"
    _write_profile(profile, {"qq-agent-presets": "1.2.0"})
    target = profile / "node_modules" / "qq-agent-presets" / "qq-tool-restrict.mjs"
    target.parent.mkdir(parents=True)
    target.write_text(guard, encoding="utf-8")
    return profile


def test_derpyu_autopatch_once_and_model_scoring(tmp_path: Path) -> None:
    """The daemon given its profile patches the whitelist once; a reload changes
    nothing; Derpyu chats are then scored by the model (§3.2.4, §3.2.5)."""
    profile = _derpyu_profile(tmp_path, GUARD)
    target = profile / "node_modules" / "qq-agent-presets" / "qq-tool-restrict.mjs"
    with running_daemon(env={"ROFMD_DSH_PROFILE_DIR": str(profile)}) as d:
        c = Client(d)
        compat = c.call("status", {})["compat"]
        assert compat["active"] and compat["derpyuPatched"] and compat["patch"] == "patched"
        patched = target.read_bytes()
        for name in ("memory_judge", "memory_recall", "memory_image", "memory_group_recall"):
            assert patched.decode().count(f"'{name}',") == 1
        backups = sorted(p.name for p in target.parent.glob("*.bak-rofm-*"))
        assert len(backups) == 1
        stat = target.stat()
        c.configure({})  # a reload re-detects and re-checks: nothing to do
        assert target.read_bytes() == patched and target.stat().st_mtime_ns == stat.st_mtime_ns
        assert sorted(p.name for p in target.parent.glob("*.bak-rofm-*")) == backups
        assert c.call("status", {})["compat"]["patch"] == "already"
        plain = d.cli("status", "--socket", str(d.socket_path)).stdout
        assert "qq compat    on (qqBots auto; derpyu-qq-bridge)" in plain, plain
        assert "Derpyu whitelist patched (already)" in plain
        folders = archive(c, "qqb-g-31")
        rules_text(c, "qqb-g-31")
        rows = read_store(session_dir_paths(d.memory_root, "qqb-g-31"), "qqb-g-31").index
        assert folders and {(e.scored, e.scoreMode) for e in rows} == {(False, "model")}
        c.close()


def test_unknown_whitelist_left_byte_identical_with_heuristic_scoring(tmp_path: Path) -> None:
    unknown = "const SAFE_EXACT = new Set(SAFE_LIST)\n"
    profile = _derpyu_profile(tmp_path, unknown)
    target = profile / "node_modules" / "qq-agent-presets" / "qq-tool-restrict.mjs"
    before = target.stat()
    with running_daemon(env={"ROFMD_DSH_PROFILE_DIR": str(profile)}) as d:
        c = Client(d)
        compat = c.call("status", {})["compat"]
        assert compat["active"] and not compat["derpyuPatched"]
        assert compat["patch"] == "unknown-structure"
        assert target.read_text(encoding="utf-8") == unknown
        assert target.stat().st_mtime_ns == before.st_mtime_ns
        assert not list(target.parent.glob("*.bak-rofm-*"))
        archive(c, "qqb-g-32")
        rules_text(c, "qqb-g-32")
        rows = read_store(session_dir_paths(d.memory_root, "qqb-g-32"), "qqb-g-32").index
        assert {(e.scored, e.scoreMode) for e in rows} == {(True, "heuristic")}
        assert "derpyu tool whitelist not patched" in d.log_path.read_text(encoding="utf-8")
        c.close()


def test_detected_derpyu_is_not_patched_without_the_profile_setting(tmp_path: Path) -> None:
    profile = _derpyu_profile(tmp_path, GUARD)
    target = profile / "node_modules" / "qq-agent-presets" / "qq-tool-restrict.mjs"
    with running_daemon(env={"DSH_PROFILE_DIR": str(profile)}) as d:
        c = Client(d)
        compat = c.call("status", {})["compat"]
        assert compat["plugins"] == ["derpyu-qq-bridge"] and not compat["derpyuPatched"]
        assert compat["patch"] == "no-profile-setting"
        assert target.read_text(encoding="utf-8") == GUARD
        c.close()
