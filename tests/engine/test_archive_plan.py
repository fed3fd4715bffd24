"""The pre-step plan: trigger, guards, cut, passes, floor, note merge, pinned, images,
re-archive (reference §1.1, §1.1.1, §1.4, §1.7, §1.8)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.archive import (
    PreStepInput,
    PreStepPlan,
    Switches,
    below_trigger,
    plan_pre_step,
    switch_off_reason,
)
from engine.archive.surface import parse_surface
from engine.config import build_config
from engine.config.model import MemoryConfig
from tests.archive_fixtures import T0, Surface


def cfg(**compress: Any) -> MemoryConfig:
    return build_config([("test", {"compress": compress})]).config


def run(
    s: Surface,
    *,
    percent: float = 70.0,
    window: int = 100_000,
    config: MemoryConfig | None = None,
    recall: list[Any] | None = None,
    readable: Mapping[str, str] | None = None,
    measured: dict[int, int] | None = None,
    turn: int | None = None,
) -> PreStepPlan:
    tokens = measured if measured is not None else {t["seq"]: t["tokens"] for t in s.tokens()}
    return plan_pre_step(
        PreStepInput(
            session_id="s1",
            turn=s.turn if turn is None else turn,
            surface=s.nodes,
            node_tokens=tokens,
            total_tokens=int(window * percent / 100),
            host_window=window,
            now_ms=T0 + 10**7,
            cfg=config or cfg(),
            recall=recall,
            readable_images=readable or {},
        )
    )


def scaled(s: Surface, total: int) -> dict[int, int]:
    """Node tokens scaled so the conversation holds ``total`` tokens."""
    raw = {t["seq"]: t["tokens"] for t in s.tokens()}
    k = total / sum(raw.values())
    return {seq: max(1, int(v * k)) for seq, v in raw.items()}


def conversation_surface(turns: int = 30, size: int = 200) -> Surface:
    s = Surface()
    s.system()
    for i in range(turns):
        s.turn_pair(i, size)
    return s


def archived_seqs(plan: PreStepPlan) -> list[int]:
    out: list[int] = []
    for f in plan.folders:
        for m in f.messages:
            if not out or out[-1] != m["seq"]:
                out.append(m["seq"])
    return out


@pytest.mark.parametrize(
    ("switches", "named"),
    [
        (Switches(True, True, False, False, True, True, True), None),
        (Switches(False, True, False, False, True, True, True), "enabled"),
        (Switches(True, False, False, False, True, True, True), "preStep"),
        (Switches(True, True, True, False, True, True, True), "subagent"),
        (Switches(True, True, True, True, True, True, True), None),
        (Switches(True, True, False, False, False, True, True), "main"),
        (Switches(True, True, False, False, True, False, True), "tokenMeter"),
        (Switches(True, True, False, False, True, True, False), "tools"),
    ],
)
def test_switches(switches: Switches, named: str | None) -> None:
    reason = switch_off_reason(switches)
    if named is None:
        assert reason is None
    else:
        assert named in (reason or "")


def test_below_trigger_does_nothing() -> None:
    assert run(conversation_surface(), percent=59.9).outcome == "below-trigger"


def test_basic_archive_cuts_at_a_turn_boundary_and_reaches_the_floor() -> None:
    s = conversation_surface()
    measured = scaled(s, 60_000)
    plan = run(s, percent=70, measured=measured)
    assert plan.outcome == "archive"
    nodes = {n["seq"]: n for n in s.nodes}
    next_node = nodes[plan.end_seq + 1]
    assert next_node["type"] == "user/message"
    assert plan.start_seq == 1
    # the release floor (50%) is reached: 70% → ≤ 50%
    assert plan.percent_after <= 50.5
    assert plan.note == f"[memory] {len(plan.folders)} 段更早的对话已归档到 memory/"
    # every archived message exactly once, in order, contiguous
    seqs = archived_seqs(plan)
    assert seqs == list(range(1, plan.end_seq + 1))
    for f in plan.folders:
        assert f.event_range is not None
        assert all(m["time"] == nodes[m["seq"]]["time"] for m in f.messages)
    # deterministic: same input, same keys
    again = run(s, percent=70, measured=measured)
    assert [f.idempotency_key for f in again.folders] == [f.idempotency_key for f in plan.folders]
    assert again.note == plan.note


def test_floor_disabled_archives_only_the_compress_share() -> None:
    s = conversation_surface()
    measured = scaled(s, 60_000)
    plan = run(s, percent=70, measured=measured, config=cfg(releaseFloorEnabled=False))
    assert plan.outcome == "archive"
    removed = plan.cut.passes[0].removed_tokens  # type: ignore[union-attr]
    assert 14_000 <= removed <= 14_000 * 1.25
    assert plan.percent_after > 50


def test_floor_not_below_trigger_is_disabled_with_a_warning() -> None:
    s = conversation_surface()
    plan = run(s, percent=70, measured=scaled(s, 60_000), config=cfg(releaseTargetPercent=65))
    assert "release-floor-disabled" in [k for k, _ in plan.warnings]
    assert plan.outcome == "archive"


def test_emergency_passes() -> None:
    s = conversation_surface(60)
    plan = run(
        s,
        percent=96,
        measured=scaled(s, 90_000),
        config=cfg(releaseFloorEnabled=False, compressPercent=5),
    )
    assert plan.outcome == "archive"
    passes = plan.cut.passes  # type: ignore[union-attr]
    assert len(passes) >= 2 and not passes[0].emergency and passes[1].emergency
    assert plan.percent_after < 85
    assert archived_seqs(plan) == list(range(1, plan.end_seq + 1))


def _tool_loop(user: str) -> Surface:
    """A surface whose one turn is `user` asking and 30 tool calls with their output."""
    s = Surface()
    s.system()
    s.user(user)
    for i in range(30):
        s.assistant("", [(f"c{i}", "run", "{}")])
        s.tool(f"c{i}", "output " * 100)
    return s


def test_protect_current_turn_refuses_when_no_cut() -> None:
    s = _tool_loop("请一直调用工具直到完成。")
    plan = run(s, percent=80, measured=scaled(s, 70_000))
    assert plan.outcome == "refused"
    assert [k for k, _ in plan.warnings] == ["no-legal-cut"]
    assert plan.folders == []


def test_huge_single_turn_is_cut_at_a_tool_safe_message_boundary() -> None:
    s = _tool_loop("开始一个很长的任务。")
    s.user("现在的问题")
    s.assistant("好")
    plan = run(s, percent=80, measured=scaled(s, 70_000))
    assert plan.outcome == "archive"
    nxt = next(n for n in s.nodes if n["seq"] == plan.end_seq + 1)
    assert nxt["type"] != "tool/result"
    last = next(n for n in s.nodes if n["seq"] == plan.end_seq)
    assert last["type"] == "tool/result"  # the pair stays together


def test_keep_recent_messages() -> None:
    s = conversation_surface(3)
    plan = run(
        s,
        percent=99,
        measured=scaled(s, 95_000),
        config=cfg(protectCurrentTurn=False, keepRecentMessages=5, minMessagesToCompress=1),
    )
    assert plan.outcome == "archive"
    conv_seqs = [n["seq"] for n in s.nodes if n["type"] != "system/message"]
    assert plan.end_seq < conv_seqs[-5]


def test_window_guards() -> None:
    s = conversation_surface()
    small = run(s, percent=70, window=8000)
    assert small.outcome == "skipped" and small.warnings[0][0] == "small-window"
    assert run(s, percent=70, window=8000, config=cfg(allowSmallWindow=True)).outcome == "archive"
    fake = run(s, percent=70, window=100_000, config=cfg(contextWindowTokens=20_000))
    assert fake.warnings[0][0] == "fake-window"
    over = run(s, percent=600, window=100_000)
    assert over.outcome == "skipped" and over.warnings[0][0] == "fake-window"
    override = run(s, percent=70, window=100_000, config=cfg(contextWindowTokens=90_000))
    assert override.window == 90_000


def test_min_context_and_min_messages() -> None:
    s = conversation_surface()
    assert run(s, percent=70, config=cfg(minContextTokens=10**9)).outcome == "skipped"
    short = Surface()
    short.system()
    short.user("a")
    short.assistant("b")
    short.user("c")
    assert run(short, percent=70, measured=scaled(short, 70_000)).outcome == "skipped"


def test_max_folders_per_step_caps_the_run() -> None:
    s = conversation_surface(40, 600)
    plan = run(s, percent=90, measured=scaled(s, 85_000), config=cfg(maxFoldersPerStep=3))
    assert plan.outcome == "archive" and len(plan.folders) == 3 and plan.max_folders_capped
    assert archived_seqs(plan) == list(range(1, plan.end_seq + 1))


def test_note_merges_our_earlier_notes_over_empty_and_pinned_nodes() -> None:
    s = Surface()
    s.system()
    s.checkpoint("[memory] 5 段更早的对话已归档到 memory/\n\n[memory] 本次归档区间内还有 1 条…")
    s.pinned("system-prompt", "", ntype="system/message")  # renders to nothing
    s.pinned("runtime-context", "Current runtime context: cwd=/x")
    for i in range(30):
        s.turn_pair(i)
    plan = run(s, percent=70, measured=scaled(s, 60_000))
    assert plan.outcome == "archive"
    assert plan.start_seq == 1
    assert plan.note == f"[memory] {5 + len(plan.folders)} 段更早的对话已归档到 memory/"
    assert plan.note_parts.merged_notes == 1
    assert plan.note_parts.appendix == []  # re-injected runtime context dropped silently


def test_foreign_checkpoint_stops_the_merge() -> None:
    s = Surface()
    s.system()
    s.checkpoint("[memory] 5 段更早的对话已归档到 memory/")
    s.checkpoint("Summary by another compressor.")
    for i in range(30):
        s.turn_pair(i)
    plan = run(s, percent=70, measured=scaled(s, 60_000))
    assert plan.start_seq == 3
    assert plan.note == f"[memory] {len(plan.folders)} 段更早的对话已归档到 memory/"


def test_pinned_one_shot_and_unknown_kinds_go_to_the_appendix() -> None:
    s = Surface()
    s.system()
    for i in range(30):
        s.turn_pair(i)
        if i == 1:
            s.pinned("subagent-settled", "子代理 A 已完成：结果 42")
            s.pinned("time-context", "Time sampled: 10:00")
            s.pinned("plugin:weird", "something new")
    plan = run(s, percent=70, measured=scaled(s, 60_000))
    assert plan.outcome == "archive"
    assert plan.note_parts.appendix == [
        ("subagent-settled", "子代理 A 已完成：结果 42"),
        ("plugin:weird", "something new"),
    ]
    assert plan.note_parts.pinned_shadowed == 3
    assert "本次归档区间内还有 2 条非对话上下文" in plan.note
    # pinned nodes never become folder content
    assert all(m["role"] in ("user", "assistant", "tool") for f in plan.folders for m in f.messages)
    assert not any("子代理" in m["content"] for f in plan.folders for m in f.messages)


def test_note_must_be_smaller_than_what_it_replaces() -> None:
    s = conversation_surface(2)
    tiny = {n["seq"]: 1 for n in s.nodes}
    plan = run(s, percent=70, measured=tiny, config=cfg(minContextTokens=0))
    assert plan.outcome == "skipped" and plan.folders == []
    assert "note-too-large" in [k for k, _ in plan.warnings]


def test_images_placeholders_and_copies(tmp_path: Any) -> None:
    img = tmp_path / "a.png"
    img.write_bytes(b"\x89PNG")
    s = Surface()
    s.system()
    s.user(
        "看这张图",
        images=[
            {
                "attachmentId": "att-1",
                "mediaType": "image/png",
                "bytes": 4,
                "width": 2,
                "height": 2,
                "hostPath": str(img),
            },
            {"attachmentId": "att-2", "mediaType": "image/jpeg"},
        ],
    )
    for i in range(30):
        s.turn_pair(i)
    plan = run(s, percent=70, measured=scaled(s, 60_000), readable={str(img): "png"})
    assert plan.outcome == "archive"
    first = plan.folders[0]
    text = first.messages[0]["content"]
    assert "[图片：（img-" in text and "-1-0.png）]" in text and "-1-1.jpg）]" in text
    copied = [i for i in first.images if i.host_path]
    assert len(copied) == 1 and copied[0].ref["attachmentId"] == "att-1"
    assert [k for k, _ in plan.warnings] == ["image-placeholder"]


@dataclass
class FakeAddition:
    """A recall-block memory (`engine.recall_view.AdditionView`), as re-archiving sees it."""

    id: str
    alpha: float
    created_at: str
    injected_turn: int
    text: str
    current_query: bool = False


def test_rearchive_oldest_low_alpha_first_current_turn_protected() -> None:
    s = conversation_surface()
    adds = [
        FakeAddition("mem-a", 0.9, "2026-01-01", 1, "高α" * 500),
        FakeAddition("mem-b", 0.2, "2026-01-02", 2, "低α" * 500),
        FakeAddition("mem-c", 0.3, "2026-01-03", 3, "低α2" * 500, current_query=True),
        FakeAddition("mem-d", 0.1, "2026-01-01", s.turn, "本回合" * 500),
    ]
    plan = run(s, percent=70, measured=scaled(s, 60_000), recall=list(adds))
    rp = plan.rearchive
    assert rp is not None
    assert rp.removed[:2] == ["mem-b", "mem-c"]
    assert "mem-d" not in rp.removed
    assert rp.recycle_high == (["mem-a"] if "mem-a" in rp.removed else [])
    assert "mem-a" not in rp.rescore
    assert plan.outcome == "archive"


def test_rearchive_share_exhausted_stops_the_pass() -> None:
    s = conversation_surface()
    big = [FakeAddition(f"mem-{i}", 0.1, f"2026-01-{i + 1:02d}", 0, "回" * 3000) for i in range(10)]
    plan = run(
        s,
        percent=70,
        measured=scaled(s, 60_000),
        recall=list(big),
        config=cfg(releaseFloorEnabled=False),
    )
    assert (
        plan.rearchive is not None and plan.rearchive.removed_tokens >= plan.rearchive.target_tokens
    )
    assert plan.outcome == "rearchive-only" and plan.folders == []


def test_rearchive_high_alpha_marked_in_emergency() -> None:
    s = conversation_surface()
    adds = [FakeAddition("mem-h", 0.95, "2026-01-01", 0, "h" * 400)]
    plan = run(s, percent=90, measured=scaled(s, 80_000), recall=list(adds))
    assert plan.rearchive is not None and plan.rearchive.rescore == ["mem-h"]


def test_parse_surface_tolerates_garbage() -> None:
    nodes = parse_surface([{"seq": "x"}, {"type": "user/message", "message": {"content": 5}}])
    assert len(nodes) == 2


# ---- what a pre-step knows before it plans ---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    total=st.integers(0, 400_000),
    window=st.integers(0, 300_000),
    trigger=st.floats(5, 95),
    configured=st.sampled_from([0, 32_000, 128_000]),
)
def test_below_trigger_is_what_the_plan_says(
    total: int, window: int, trigger: float, configured: int
) -> None:
    config = cfg(triggerPercent=trigger, contextWindowTokens=configured)
    s = conversation_surface(turns=4)
    plan = plan_pre_step(
        PreStepInput(
            session_id="s1",
            turn=s.turn,
            surface=s.nodes,
            node_tokens={},
            total_tokens=total,
            host_window=window,
            now_ms=T0,
            cfg=config,
        )
    )
    quiet = plan.outcome == "below-trigger" and not plan.warnings
    assert below_trigger(total, window, config) == quiet
    if plan.outcome == "below-trigger":
        assert quiet


def test_image_files_matter_only_for_the_archived_span(tmp_path: Any) -> None:
    """`image_paths` names the images the plan archives: a plan given the formats of those
    alone is the plan given every image's (the kept tail's are never consulted)."""
    old, kept = tmp_path / "old.png", tmp_path / "kept.png"
    old.write_bytes(b"\x89PNG")
    kept.write_bytes(b"\x89PNG")
    s = Surface()
    s.system()
    s.user("旧图", images=[{"attachmentId": "a1", "mediaType": "image/png", "hostPath": str(old)}])
    for i in range(30):
        s.turn_pair(i)
    s.user("新图", images=[{"attachmentId": "a2", "mediaType": "image/png", "hostPath": str(kept)}])
    every = {str(old): "png", str(kept): "png"}
    measured = scaled(s, 60_000)
    blind = run(s, percent=70, measured=measured)
    assert blind.outcome == "archive" and blind.image_paths == (str(old),)
    full = run(s, percent=70, measured=measured, readable=every)
    only = run(s, percent=70, measured=measured, readable={str(old): "png"})
    assert only == full and full != blind
    assert any(img.host_path for f in full.folders for img in f.images)
    quiet = run(s, percent=10, measured=measured, readable=every)
    assert quiet.outcome == "below-trigger" and quiet.image_paths == ()
