"""memory_group_recall's pure rules (reference §3.2.10, §3.2.9): who may call, in which
order the checks run, what the arguments mean, which memories answer, and the texts,
against the reference's examples after NFKC."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from engine import texts
from engine.compat.status import CompatStatus
from engine.config import MemoryConfig, deep_merge
from engine.config.validate import validate_tree
from engine.recall.group_recall import (
    GroupCall,
    GroupMemory,
    GroupStore,
    authorize,
    cap_folders,
    choose_groups,
    group_label,
    parse_group_call,
    render_answer,
    select_memories,
    snippet,
)
from engine.recall.group_stores import group_dir_names

SPEC = Path("/work/shared/spec/dsh-rofm-reference.txt")
SHANGHAI = timezone(timedelta(hours=8))
ACTIVE = CompatStatus(mode="on", active=True, onebot=True)


def cfg(**tree: Any) -> MemoryConfig:
    base = {"time": {"timezone": "Asia/Shanghai"}, "compat": {"qqBots": "on", "ownerIds": ["1"]}}
    merged, _ = validate_tree(deep_merge(base, tree))
    return MemoryConfig.model_validate(merged)


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=SHANGHAI).timestamp() * 1000)


@dataclass(frozen=True)
class Entry:
    """What the selection reads of an index entry."""

    id: str
    createdAt: int
    alpha: float = 0.5
    keywords: list[str] = field(default_factory=list)
    title: str = ""
    scored: bool = True
    eventStart: int | None = None


# ---- authorisation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "subagent", "tools", "tree", "status", "reason"),
    [
        ("onebot-private-1", False, True, {}, ACTIVE, None),
        ("qqb-p-1", False, True, {}, ACTIVE, None),
        ("onebot-private-1", False, True, {}, CompatStatus(mode="off"), "disabled"),
        (
            "onebot-group-5",
            False,
            True,
            {"compat": {"crossChat": {"enabled": False}}},
            ACTIVE,
            "disabled",
        ),
        ("onebot-group-5", False, False, {}, ACTIVE, "no-tools"),
        ("onebot-group-5", False, True, {}, ACTIVE, "group-chat"),
        (
            "qqb-g-5",
            False,
            True,
            {"compat": {"crossChat": {"ownerOnly": False}}},
            ACTIVE,
            "group-chat",
        ),
        ("session-abc", False, True, {}, ACTIVE, "not-private"),
        ("onebot-1", False, True, {}, ACTIVE, "not-private"),
        ("onebot-private-1", True, True, {}, ACTIVE, "subagent"),
        ("onebot-private-2", False, True, {}, ACTIVE, "not-owner"),
        ("onebot-private-1", False, True, {"compat": {"ownerIds": []}}, ACTIVE, "no-owner-ids"),
        (
            "onebot-private-2",
            False,
            True,
            {"compat": {"ownerIds": [], "crossChat": {"ownerOnly": False}}},
            ACTIVE,
            None,
        ),
        (
            "onebot-private-1",
            False,
            True,
            {"storage": {"perSession": False}},
            ACTIVE,
            "shared-store",
        ),
        ("onebot-private-2", False, True, {"storage": {"perSession": False}}, ACTIVE, "not-owner"),
    ],
)
def test_authorisation_in_the_reference_order(
    key: str,
    subagent: bool,
    tools: bool,
    tree: dict[str, Any],
    status: CompatStatus,
    reason: str | None,
) -> None:
    refusal = authorize(cfg(**tree), status, key, subagent=subagent, tools_enabled=tools)
    assert (refusal.reason if refusal else None) == reason
    if refusal is not None:
        assert "/" not in refusal.text


def test_owner_ids_given_as_numbers_match_the_key() -> None:
    config = cfg(compat={"ownerIds": [10001]})
    assert authorize(config, ACTIVE, "qqb-p-10001", subagent=False, tools_enabled=True) is None


def test_cross_chat_defaults_and_clamps_are_the_reference_table() -> None:
    cross = cfg().compat.cross_chat
    assert (cross.enabled, cross.owner_only, cross.max_results) == (True, True, 20)
    assert (cross.max_snippet_chars, cross.max_groups, cross.max_folders_per_group) == (
        400,
        50,
        5000,
    )
    wild = {"maxResults": 99, "maxSnippetChars": 5, "maxGroups": 0, "maxFoldersPerGroup": 10**7}
    clamped = cfg(compat={"crossChat": wild}).compat.cross_chat
    assert (clamped.max_results, clamped.max_snippet_chars) == (20, 80)
    assert (clamped.max_groups, clamped.max_folders_per_group) == (1, 100000)
    _, warnings = validate_tree({"compat": {"crossChat": {"ownerOnly": False}}})
    assert any("ownerOnly is false" in w for w in warnings)


# ---- arguments ----------------------------------------------------------------------


def test_limit_and_offset_defaults_and_clamps() -> None:
    call = parse_group_call({}, cfg())
    assert (call.limit, call.offset, call.warnings) == (8, 0, ())
    call = parse_group_call({"limit": 0, "offset": -3}, cfg())
    assert (call.limit, call.offset) == (1, 0)
    assert call.warnings == (
        "limit=0 超出 1..20，已按 1 处理。",
        "offset=-3 超出 0..1000，已按 0 处理。",
    )
    capped = parse_group_call({"limit": 9}, cfg(compat={"crossChat": {"maxResults": 5}}))
    assert capped.limit == 5 and "limit=9 超出 1..5，已按 5 处理。" in capped.warnings
    assert parse_group_call({}, cfg(compat={"crossChat": {"maxResults": 5}})).limit == 5
    odd = parse_group_call({"limit": "x", "offset": 2.7}, cfg())
    assert (odd.limit, odd.offset) == (8, 2)
    assert any(w.startswith("limit=x 不是整数") for w in odd.warnings)


def test_query_words_are_a_union_capped_at_16() -> None:
    call = parse_group_call({"query": "部署  网关，部署"}, cfg())
    assert call.words == ("部署", "网关")
    many = parse_group_call({"query": " ".join(f"w{i}" for i in range(20))}, cfg())
    assert len(many.words) == 16 and any("最多 16 个词" in w for w in many.warnings)
    bad = parse_group_call({"query": ["a"]}, cfg())
    assert bad.words == () and bad.warnings


def test_unknown_arguments_and_a_bad_list_groups_only_warn() -> None:
    call = parse_group_call({"keywords": "x", "listGroups": "yes"}, cfg())
    assert call.list_groups is False and call.error is None
    assert call.warnings[0].startswith("memory_group_recall 没有参数 keywords")
    assert "listGroups=yes 不是 true/false，已按 false 处理。" in call.warnings


def test_a_secret_in_the_query_is_refused() -> None:
    call = parse_group_call({"query": "sk-proj-4f9Qz8LmN2vX7rT1kY6bW3cJ"}, cfg())
    assert call.error == texts.GROUP_RECALL_SECRET_QUERY


@pytest.mark.parametrize(
    ("given", "number", "key"),
    [
        ("123456", "123456", None),
        (123456, "123456", None),
        ("onebot-group-123456", None, "onebot-group-123456"),
        ("onebot-group-123456-m1abcd2e", None, "onebot-group-123456"),
        ("qqb-g-987654-" + "ab" * 16, None, "qqb-g-987654"),
        ("../../onebot-private-1", None, None),
        ("onebot-private-1", None, None),
        ("/etc/passwd", None, None),
    ],
)
def test_group_is_normalised_to_a_filter(given: Any, number: str | None, key: str | None) -> None:
    call = parse_group_call({"group": given}, cfg())
    assert call.group is not None
    assert (call.group.number, call.group.key) == (number, key)
    if number is None and key is None:
        assert call.warnings == (texts.GROUP_RECALL_WARN_GROUP_UNKNOWN,)


def test_the_group_filter_only_picks_listed_group_directories() -> None:
    names = [
        "onebot-group-123456",
        "qqb-g-987654",
        "qqb-g-987654-" + "cd" * 16,  # stored before compat folded it
        "onebot-private-1",
        "qqb-p-1",
        "session-x",
        ".staging",
    ]
    every, none = choose_groups(names, parse_group_call({}, cfg()), cfg())
    assert every == ["onebot-group-123456", "qqb-g-987654", "qqb-g-987654-" + "cd" * 16]
    assert none == []
    picked, _ = choose_groups(names, parse_group_call({"group": "987654"}, cfg()), cfg())
    assert picked == ["qqb-g-987654", "qqb-g-987654-" + "cd" * 16]
    key, _ = choose_groups(names, parse_group_call({"group": "qqb-g-987654"}, cfg()), cfg())
    assert key == picked
    traversal = parse_group_call({"group": "onebot-group-../../qqb-p-1"}, cfg())
    assert choose_groups(names, traversal, cfg())[0] == []
    cut, warning = choose_groups(names, GroupCall(), cfg(compat={"crossChat": {"maxGroups": 2}}))
    assert cut == every[:2]
    assert warning == ["群聊记忆库共 3 个，超过 crossChat.maxGroups=2：只查了按名称排序的前 2 个。"]


def time_call(**arguments: Any) -> GroupCall:
    return parse_group_call(arguments, cfg())


def test_calendar_endpoints_are_civil_days_and_a_date_only_time_to_includes_its_day() -> None:
    call = time_call(timeFrom="2026-11-02", timeTo="2026-11-02")
    assert (call.start, call.end) == (ms(2026, 11, 2), ms(2026, 11, 3))
    month = time_call(timeFrom="2026-12", timeTo="2026-12")
    assert (month.start, month.end) == (ms(2026, 12, 1), ms(2027, 1, 1))
    year = time_call(timeTo="2026")
    assert (year.start, year.end) == (None, ms(2027, 1, 1))
    assert year.time_labels == ("…", "2026")
    assert time_call(timeFrom=2026).start == ms(2026, 1, 1)


def test_instants_full_iso_with_a_zone_and_epoch_ms() -> None:
    t = ms(2026, 11, 2, 22, 35)
    iso = time_call(timeFrom="2026-11-02T14:35:00Z", timeTo="2026-11-02T22:35:00+08:00")
    assert (iso.start, iso.end) == (t, t + 1)
    assert iso.time_labels == ("2026-11-02 22:35", "2026-11-02 22:35")
    epoch = time_call(timeFrom=t, timeTo=str(t))
    assert (epoch.start, epoch.end) == (t, t + 1)
    naive = time_call(timeFrom="2026-11-02T22:35:00")
    assert naive.start == t


def test_bad_time_input_is_ignored_with_a_warning_and_swaps_warn() -> None:
    bad = time_call(timeFrom="上古", timeTo=1_700_000_000)
    assert (bad.start, bad.end) == (None, None)
    assert bad.warnings[0].startswith("timeFrom=上古 不是可识别的时间")
    assert "epoch 秒" in bad.warnings[1]
    swapped = time_call(timeFrom="2026-11-03", timeTo="2026-11-01")
    assert (swapped.start, swapped.end) == (ms(2026, 11, 1), ms(2026, 11, 4))
    assert swapped.warnings == (texts.TIME_WARN_SWAPPED,)
    assert time_call(timeFrom="2026-11-01", timeTo="2026-11-01").warnings == ()


# ---- selection ---------------------------------------------------------------------


def store(name: str, *entries: Entry) -> GroupStore:
    return GroupStore(name, tuple(entries))


def test_matches_are_ordered_by_words_matched_then_alpha_and_recent_without_words() -> None:
    a = store(
        "onebot-group-1",
        Entry("m1", ms(2026, 11, 1), 0.9, ["部署"]),
        Entry("m2", ms(2026, 11, 2), 0.4, ["部署端口", "网关"]),
        Entry("m3", ms(2026, 11, 3), 0.7, ["午饭"]),
    )
    b = store("qqb-g-2", Entry("m4", ms(2026, 10, 1), 0.95, ["接口网关"]))
    found = select_memories([a, b], parse_group_call({"query": "部署 网关"}, cfg()), cfg())
    assert [m.id for m in found] == ["m2", "m4", "m1"]
    assert found[0].hits == 2
    recent = select_memories([a, b], parse_group_call({}, cfg()), cfg())
    assert [m.id for m in recent] == ["m3", "m2", "m1", "m4"]


def test_the_time_is_event_start_else_created_at() -> None:
    s = store(
        "onebot-group-1",
        Entry("late", ms(2026, 11, 5), eventStart=ms(2026, 11, 1, 9)),
        Entry("plain", ms(2026, 11, 5)),
    )
    day = parse_group_call({"timeFrom": "2026-11-01", "timeTo": "2026-11-01"}, cfg())
    assert [m.id for m in select_memories([s], day, cfg())] == ["late"]


def test_unscored_memories_never_answer_and_the_folder_cap_keeps_the_newest() -> None:
    entries = [Entry(f"m{i}", ms(2026, 11, 1) + i, scored=i != 4) for i in range(6)]
    kept, warning = cap_folders(
        "onebot-group-9", entries, cfg(compat={"crossChat": {"maxFoldersPerGroup": 3}})
    )
    assert [e.id for e in kept] == ["m3", "m5"]
    assert warning == [
        "群 9 有 6 个记忆文件夹，超过 crossChat.maxFoldersPerGroup=3：只查了最近的 3 个。"
    ]
    everything, none = cap_folders("onebot-group-9", entries, cfg())
    assert len(everything) == 5 and none == []


def test_snippets_are_readable_one_line_and_cut_without_splitting_a_character() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "部署端口\n是 8443"}]},
        {"role": "assistant", "content": "好的"},
        {"role": "tool", "content": "TOOL-OUTPUT"},
    ]
    assert snippet(messages, 400) == ("user: 部署端口 / 是 8443 / assistant: 好的", False)
    cut, was_cut = snippet([{"role": "user", "content": "😀" * 100}], 80)
    assert was_cut and cut == "user: " + "😀" * 74
    tool_only = [{"role": "tool", "content": [{"type": "text", "text": "exit 0"}]}]
    assert snippet(tool_only, 80) == ("exit 0", False)


# ---- the texts, against the reference ---------------------------------------------------


def squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


@pytest.fixture(scope="module")
def spec() -> str:
    if not SPEC.exists():
        pytest.skip("reference text not available")
    text = squash(SPEC.read_text(encoding="utf-8"))
    return text[text.index("3.2.10跨聊天记忆查询") : text.index("3.2.11已知限制")]


def example_stores() -> list[GroupStore]:
    deploy = Entry("m-1", ms(2026, 11, 2, 22, 35), 0.8, ["部署"], "部署端口约定")
    more = [Entry(f"m-{i}", ms(2026, 10, 1) + i, 0.5, ["部署"], f"t{i}") for i in range(2, 43)]
    other = [Entry(f"q-{i}", ms(2026, 10, 1) + i, 0.5, ["x"], "q") for i in range(6)]
    other.append(Entry("q-9", ms(2026, 11, 1, 9, 12), 0.5, ["x"], "q"))
    return [store("onebot-group-123456", deploy, *more), store("qqb-g-987654", *other)]


def test_the_answer_is_the_reference_example(spec: str) -> None:
    stores = example_stores()[:1]
    call = parse_group_call({"query": "部署", "group": "123456", "limit": 3}, cfg())
    found = select_memories(stores, call, cfg())
    snippets: dict[tuple[str, str], tuple[str, bool] | None] = {
        (m.store, m.id): ("……", False) for m in found
    }
    answer = render_answer(call, stores, found, snippets, cfg())
    lines = answer.text.splitlines()
    assert lines[0] == "跨群记忆查询（仅群聊，共 42 条命中；显示第 1–3 条）"
    assert squash("跨群记忆查询（仅群聊，共 3 条命中；显示第 1–3 条）") in spec
    assert squash(lines[1]) in spec and lines[1] == "条件：关键词=部署 · 群=123456"
    assert squash(lines[2]) in spec
    assert lines[2] == "1. [群 123456] 2026-11-02 22:35 · α=0.80 · 标题=部署端口约定"
    assert lines[3] == "   摘要：……" and squash(lines[3]) in spec
    assert lines[-3:] == ["", "（还有更多：可用 offset=3 继续）", texts.GROUP_RECALL_SCOPE]
    assert squash("\n".join(lines[-2:])) in spec
    assert squash(texts.GROUP_RECALL_TRUNCATED) in spec
    assert answer.value["total"] == 42 and answer.value["nextOffset"] == 3


def test_the_miss_and_the_listing_are_the_reference_examples(spec: str) -> None:
    stores = example_stores()
    call = parse_group_call({}, cfg())
    miss = render_answer(call, stores, [], {}, cfg())
    assert squash(miss.text) in spec
    assert miss.text.split("\n")[1] == ""
    listing_call = parse_group_call({"listGroups": True}, cfg())
    found = select_memories(stores, listing_call, cfg())
    listing = render_answer(listing_call, stores, found, {}, cfg())
    assert listing.text == (
        "跨群记忆查询（仅群聊 · listGroups）\n\n"
        "- 群 123456（onebot-group-123456）· 42 条记忆 · 最近 2026-11-02 22:35\n"
        "- 群 987654（qqb-g-987654）· 7 条记忆 · 最近 2026-11-01 09:12\n\n"
        "共 2 个群有群聊记忆。\n\n"
        "数据范围：仅 QQ 群聊记忆；不含私聊 / WebUI / 子代理记忆。"
    )
    assert squash(listing.text) in spec


def test_the_offset_past_the_end_and_the_warning_lines_are_the_reference_forms(
    spec: str,
) -> None:
    stores = example_stores()[:1]
    call = parse_group_call({"query": "部署", "offset": 50, "timeFrom": "bad"}, cfg())
    found = select_memories(stores, call, cfg())
    text = render_answer(call, stores, found, {}, cfg()).text
    offset_line = texts.GROUP_RECALL_OFFSET_PAST.format(offset="…", total="N")
    reference = squash("本页没有条目:offset=… 超出范围(共 N 条命中)")
    assert squash(offset_line).startswith(reference) and reference in spec
    assert "本页没有条目：offset=50 超出范围（共 42 条命中）" in text
    assert "\n提示：timeFrom=bad 不是可识别的时间" in text
    assert squash("提示:… 行") in spec


def test_parameter_texts_are_the_reference_table(spec: str) -> None:
    table = spec[spec.index("参数类型说明query") : spec.index("输出示例")]
    for name in (
        "GROUP_RECALL_PARAM_QUERY",
        "GROUP_RECALL_PARAM_GROUP",
        "GROUP_RECALL_PARAM_LIMIT",
        "GROUP_RECALL_PARAM_OFFSET",
        "GROUP_RECALL_PARAM_TIME",
        "GROUP_RECALL_PARAM_LIST_GROUPS",
    ):
        assert squash(getattr(texts, name)) in table, name
    assert "本工具仅限QQ私聊使用" in squash(texts.GROUP_RECALL_REFUSED_GROUP)
    assert "本工具仅限QQ私聊使用" in spec


def test_a_memory_shows_its_title_on_one_line() -> None:
    s = store("onebot-group-1", Entry("m", ms(2026, 11, 1), 0.5, ["a"], "第一行\n第二行"))
    call = parse_group_call({}, cfg())
    found = [GroupMemory("onebot-group-1", "m", "第一行\n第二行", 0.5, ms(2026, 11, 1), 0)]
    text = render_answer(call, [s], found, {("onebot-group-1", "m"): None}, cfg()).text
    assert "标题=第一行 第二行" in text
    assert "   摘要：（原文暂时无法读取）" in text


@pytest.mark.parametrize("key", ["onebot-private-1\n", "qqb-p-1\n", "onebot-private-١"])
def test_a_look_alike_of_the_owners_private_chat_is_refused(key: str) -> None:
    """Owner 1's private chat is `onebot-private-1`; an id that only looks like it (a
    final line break, which Python's `$` let through, or another script's digit) is not
    a private chat, so it reads no group memory."""
    refusal = authorize(cfg(), ACTIVE, key, subagent=False, tools_enabled=True)
    assert refusal is not None and refusal.reason == "not-private"


def test_a_directory_named_like_a_group_but_for_a_line_break_is_no_group_store(
    tmp_path: Path,
) -> None:
    """`onebot-group-1` followed by a line break is where the mapping before whole-id
    patterns put a look-alike id's store: never read as group 1's."""
    sessions = tmp_path / "sessions"
    for name in ("onebot-group-1", "onebot-group-1\n", "qqb-g-2\n", "qqb-g-2"):
        (sessions / name).mkdir(parents=True)
    assert group_dir_names(tmp_path) == ["onebot-group-1", "qqb-g-2"]
    picked, _ = choose_groups(
        ["onebot-group-1", "onebot-group-1\n"], parse_group_call({"group": "1"}, cfg()), cfg()
    )
    assert picked == ["onebot-group-1"]
    assert group_label("onebot-group-1\n")[1] != "1"
