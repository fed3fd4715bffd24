"""memory_judge planning: validation, clamping, cleaning, tags, merge approval, warnings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from engine import texts
from engine.config import MemoryConfig, build_config
from engine.scoring.categories import detect_category, ensure_category
from engine.scoring.events import candidates, existing_label_list, label_counts, similarity
from engine.scoring.judge import (
    FolderFacts,
    FolderUnreadable,
    JudgePlan,
    clamp_alpha,
    clamp_beta,
    clean_keywords,
    plan_judge,
)
from engine.scoring.labels import normalize_label, normalize_location

NOW = 1_795_000_000_000
CFG = MemoryConfig.defaults()
KW = ["星港项目", "接口网关", "端口 8080"]


def cfg_with(tree: Mapping[str, Any]) -> MemoryConfig:
    return build_config([("test", tree)]).config


def run(
    updates: Any,
    folders: Mapping[str, FolderFacts] | None = None,
    *,
    counts: Mapping[str, int] | None = None,
    text: str = "",
    cfg: MemoryConfig = CFG,
) -> JudgePlan:
    known = dict(folders or {})

    def folder(fid: str) -> FolderFacts | None:
        if fid == "mem-bad":
            raise FolderUnreadable(fid)
        return known.get(fid)

    return plan_judge(
        {"updates": updates},
        folder=folder,
        text_of=lambda _fid: text,
        label_counts=counts or {},
        cfg=cfg,
        now_ms=NOW,
    )


def new(fid: str, **kw: Any) -> FolderFacts:
    return FolderFacts(fid, scored=False, rescore_pending=False, **kw)


def review(fid: str, **kw: Any) -> FolderFacts:
    return FolderFacts(fid, scored=True, rescore_pending=True, **kw)


def full(fid: str, **extra: Any) -> dict[str, Any]:
    return {"id": fid, "alpha": 0.5, "beta": 1, "keywords": KW, "events": ["项目"], **extra}


def reasons(plan: JudgePlan) -> dict[str, str]:
    return {r["id"]: r["reason"] for r in plan.value["rejected"]}


def test_new_folder_written_with_llm_sources() -> None:
    plan = run([full("mem-a", reason=" 用户 确认 ")], {"mem-a": new("mem-a")})
    assert plan.value["updated"] == ["mem-a"]
    change = plan.changes["mem-a"]
    assert change["scored"] is True and change["rescorePending"] is False
    assert change["alpha"] == 0.5 and change["beta"] == 1.0 and change["keywords"] == KW
    assert change["alphaSource"] == change["betaSource"] == change["keywordsSource"] == "llm"
    assert change["judgedAt"] == NOW and change["scoreMode"] == "model"
    assert change["reason"] == "用户 确认"
    assert plan.text.startswith("已更新 1 条（mem-a）；保持 0 条；拒绝 0 条。")
    assert plan.touched


def test_every_rejection_reason() -> None:
    folders = {"mem-a": new("mem-a"), "mem-r": review("mem-r"), "mem-s": review("mem-s")}
    plan = run(
        [
            "not an object",
            {"alpha": 0.5},
            {"id": "mem-zzz", "alpha": 0.5, "beta": 0, "keywords": KW},
            {"id": "mem-bad", "keep": True},
            {"id": "mem-a", "alpha": 0.5, "keywords": KW},
            {"id": "mem-a", "alpha": 0.5, "beta": 0, "keywords": KW},
            {"id": "mem-r", "alpha": "high"},
            {"id": "mem-s", "beta": True},
        ],
        folders,
    )
    rej = plan.value["rejected"]
    assert rej[0] == {"id": "?", "reason": "update must be an object"}
    assert rej[1] == {"id": "?", "reason": "missing id"}
    assert reasons(plan) == {
        "?": "missing id",
        "mem-zzz": "unknown folder id",
        "mem-bad": "folder unreadable",
        "mem-a": "duplicate id in batch",
        "mem-r": "alpha must be a number",
        "mem-s": "beta must be a number",
    }
    assert rej[4] == {
        "id": "mem-a",
        "reason": "new folder needs alpha + beta + keywords (missing beta)",
    }
    assert plan.changes == {}
    assert not plan.touched


def test_keyword_count_and_keep_rules() -> None:
    folders = {f"mem-{i}": new(f"mem-{i}") for i in range(4)} | {"mem-r": review("mem-r")}
    plan = run(
        [
            {"id": "mem-0", "alpha": 0.5, "beta": 0, "keywords": ["一", " 一 ", "二"]},
            {"id": "mem-1", "alpha": 0.5, "beta": 0, "keywords": [f"词{i}" for i in range(17)]},
            {"id": "mem-2", "keep": True},
            {"id": "mem-3", "alpha": 0.5, "beta": 0, "keywords": "甲，乙、丙;丁"},
            {"id": "mem-r"},
        ],
        folders,
    )
    assert reasons(plan) == {
        "mem-0": "keywords must be 3~16 after cleaning (got 2)",
        "mem-1": "keywords must be 3~16 after cleaning (got 17)",
        "mem-2": "new folder needs alpha + beta + keywords (missing alpha, beta, keywords)",
        "mem-r": "nothing to update: give alpha / beta or keep=true",
    }
    assert plan.changes["mem-3"]["keywords"] == ["甲", "乙", "丙", "丁"]


def test_review_changes_alpha_beta_only_and_keep() -> None:
    folders = {"mem-r": review("mem-r"), "mem-k": review("mem-k"), "mem-s": review("mem-s")}
    plan = run(
        [
            {"id": "mem-r", "beta": -4, "keywords": KW},
            {"id": "mem-k", "keep": True},
            {"id": "mem-s", "alpha": 0.3, "keep": True},
        ],
        folders,
    )
    assert plan.value["updated"] == ["mem-r", "mem-s"]
    assert plan.value["kept"] == ["mem-k"]
    assert plan.changes["mem-r"] == {
        "beta": -4.0,
        "betaSource": "llm",
        "rescorePending": False,
        "judgedAt": NOW,
        "scoreMode": "model",
    }
    assert plan.changes["mem-k"] == {"rescorePending": False}
    assert any(w.startswith("keywords-ignored: mem-r") for w in plan.value["warnings"])
    assert "保持 1 条" in plan.text


def test_clamping() -> None:
    assert clamp_alpha(1.5, 0.01, 1) == 1
    assert clamp_alpha(0.123456, 0.01, 1) == 0.1235
    assert clamp_alpha(-3, 0.01, 1) == 0.01
    assert clamp_beta(12) == 10.0 and clamp_beta(-99) == -10.0
    assert clamp_beta(2.26) == 2.3
    beta = clamp_beta(-0.04)
    assert beta == 0 and str(beta) == "0.0"
    plan = run(
        [{"id": "mem-a", "alpha": "0.33333", "beta": -0.01, "keywords": KW}],
        {"mem-a": new("mem-a")},
    )
    assert plan.changes["mem-a"]["alpha"] == 0.3333
    assert str(plan.changes["mem-a"]["beta"]) == "0.0"


def test_keyword_cleaning() -> None:
    assert clean_keywords(
        ["  Ｒｅｄｉｓ  ", "redis", "「接口网关」", "a\u200bb", "", 7, None, True]
    ) == [
        "Redis",
        "接口网关",
        "ab",
        "7",
    ]
    assert clean_keywords("甲, 乙；丙\n丁") == ["甲", "乙", "丙", "丁"]
    assert len(clean_keywords(["字" * 100])[0]) == 64


def test_batch_limits() -> None:
    empty = run([])
    assert empty.is_error and empty.text == texts.JUDGE_ERROR_UPDATES
    missing = plan_judge(
        {}, folder=lambda _: None, text_of=lambda _: "", label_counts={}, cfg=CFG, now_ms=NOW
    )
    assert missing.is_error
    many = run([{"id": f"mem-{i}"} for i in range(101)])
    assert many.is_error
    assert many.text == texts.JUDGE_ERROR_TOO_MANY.format(max=100, n=101)
    small = run([{"id": "x"}] * 3, cfg=cfg_with({"scoring": {"maxItemsPerJudge": 2}}))
    assert small.is_error and "最多 2 条" in small.text


def test_warnings_and_telemetry() -> None:
    folders = {f"mem-{i}": new(f"mem-{i}") for i in range(3)}
    plan = run(
        [{"id": f"mem-{i}", "alpha": 0.9, "beta": 2, "keywords": KW} for i in range(3)],
        folders,
        text="闲聊",
    )
    warnings = plan.value["warnings"]
    codes = [w.split(":", 1)[0] for w in warnings]
    assert "quality-uniform-alpha" in codes
    assert "quality-uniform-beta" in codes
    assert "quality-keyword-repeat" in codes
    assert "quality-reason-missing" in codes
    assert "event-missing" in codes
    assert codes.count("category-keyword-missing") == 3
    above = [w for w in warnings if w.startswith("注意：α=0.9")]
    assert len(above) == 3
    assert plan.text.splitlines()[-1] == above[-1]
    tel = plan.telemetry
    assert tel is not None
    assert tel["type"] == "judge" and tel["batchSize"] == 3 and tel["updated"] == 3
    assert tel["uniformAlphaRate"] == 1.0
    assert tel["keywordRepeatRate"] == pytest.approx(0.6667, abs=1e-4)
    assert tel["reasonMissingRate"] == 1.0
    assert "星港项目" not in str(tel)


def test_uniform_warning_can_be_switched_off() -> None:
    folders = {f"mem-{i}": new(f"mem-{i}") for i in range(3)}
    cfg = cfg_with({"scoring": {"warnUniformAlpha": False}})
    plan = run(
        [
            {
                "id": f"mem-{i}",
                "alpha": 0.4,
                "beta": 2,
                "keywords": [f"k{i}", f"j{i}", f"m{i}"],
                "reason": "r",
                "events": ["e"],
            }
            for i in range(3)
        ],
        folders,
        cfg=cfg,
    )
    assert plan.value["warnings"] == []


def test_category_keywords_added_replaced_missing() -> None:
    folders = {
        "mem-a": new("mem-a"),
        "mem-b": new("mem-b"),
        "mem-c": new("mem-c"),
        "mem-d": new("mem-d"),
    }
    sixteen = [f"词{i}" for i in range(16)]
    plan = run(
        [
            {"id": "mem-a", "alpha": 0.8, "beta": 3, "keywords": KW, "events": ["x"]},
            {"id": "mem-b", "alpha": 0.8, "beta": 3, "keywords": sixteen, "events": ["x"]},
            {"id": "mem-c", "alpha": 0.8, "beta": 3, "keywords": [*KW, "喜好"], "events": ["x"]},
            {"id": "mem-d", "alpha": 0.5, "beta": 3, "keywords": KW, "events": ["x"]},
        ],
        folders,
        text="user: 我喜欢吃辣，以后都点川菜",
    )
    assert plan.changes["mem-a"]["keywords"] == [*KW, "喜好"]
    assert plan.changes["mem-b"]["keywords"] == [*sixteen[:15], "喜好"]
    assert plan.changes["mem-c"]["keywords"] == [*KW, "喜好"]
    assert plan.changes["mem-d"]["keywords"] == KW
    warnings = plan.value["warnings"]
    assert any(w.startswith("category-keyword-added: mem-a") and "「喜好」" in w for w in warnings)
    assert any(
        w.startswith("category-keyword-replaced: mem-b") and "「词15」" in w for w in warnings
    )
    assert not any("mem-c" in w or "mem-d" in w for w in warnings if w.startswith("category"))
    off = run(
        [{"id": "mem-a", "alpha": 0.8, "beta": 3, "keywords": KW}],
        {"mem-a": new("mem-a")},
        text="我喜欢",
        cfg=cfg_with({"scoring": {"categoryKeyword": {"enabled": False}}}),
    )
    assert off.changes["mem-a"]["keywords"] == KW


def test_category_detection() -> None:
    words = CFG.scoring.category_keyword.words
    assert detect_category("我们约定好了，以后每周一开会", words) == "约定"
    assert detect_category("我讨厌香菜", words) == "喜好"
    assert detect_category("最终决定用 Postgres", words) == "决定"
    assert detect_category("今天天气不错", words) == ""
    assert detect_category("我喜欢猫", ["约定"]) == ""
    assert (
        ensure_category(["规则手册", "b", "c"], "我喜欢", words=words, max_keywords=16).action
        == "none"
    )


def test_label_normalisation() -> None:
    assert normalize_label("  「 日本  旅行 」 ", 60) == "日本 旅行"
    assert normalize_label("Ｊａｐａｎ Trip", 60) == "japan trip"
    assert normalize_label("空", 60) == "" and normalize_label("N/A", 60) == ""
    assert normalize_label("a\u200bb", 60) == "ab"
    assert normalize_label("字" * 80, 60) == "字" * 60
    assert [
        normalize_location(x, 60) for x in ("我家", "我家里", "在家", "回家", "家里", "家")
    ] == ["家"] * 6
    assert normalize_location("小明的家", 60) == "小明家"
    assert normalize_location("朋友的家", 60) == "朋友家"
    assert normalize_location("公司", 60) == "公司"
    assert normalize_label("小明的家", 60) == "小明的家"


def test_tags_written_and_counted() -> None:
    folders = {"mem-a": new("mem-a"), "mem-r": review("mem-r", events=("旧事件",), persons=("甲",))}
    plan = run(
        [
            full(
                "mem-a",
                events=["日本旅行", "日本旅行", "空"],
                locations=["我家", "北京", "北京"],
                persons=["周岑", "小周"],
            ),
            {"id": "mem-r", "event": "空", "persons": []},
        ],
        folders,
        counts={"旧事件": 1},
    )
    a = plan.changes["mem-a"]
    assert a["events"] == ["日本旅行"] and a["event"] == "日本旅行"
    assert a["eventSource"] == "llm" and a["eventAt"] == NOW
    assert a["locations"] == ["家", "北京"] and a["persons"] == ["周岑", "小周"]
    r = plan.changes["mem-r"]
    assert r["events"] is None and r["event"] is None and r["persons"] is None
    assert plan.value["updated"] == ["mem-a", "mem-r"]
    assert plan.value["tagStats"] == {"locations": 2, "persons": 2, "events": 1}
    assert plan.value["eventStats"] == {"assigned": 1, "merged": 0, "cleared": 1, "candidates": 0}
    assert (
        "事件标签：打标 1 条、归并 0 条、清空 1 条、待确认归并 0 条。标签写入：地点 2 个、人物 2 个、事件 1 个。"
        in plan.text
    )


def test_tag_caps_events_and_event_and_modes() -> None:
    plan = run(
        [
            full(
                "mem-a",
                events=[f"事件{i}" for i in range(6)],
                event="别的",
                locations=[f"地{i}" for i in range(9)],
            )
        ],
        {"mem-a": new("mem-a")},
    )
    assert plan.changes["mem-a"]["events"] == [f"事件{i}" for i in range(4)]
    assert len(plan.changes["mem-a"]["locations"]) == 8
    codes = [w.split(":", 1)[0] for w in plan.value["warnings"]]
    assert codes.count("tags-truncated") == 2 and "events-and-event" in codes
    off = run(
        [full("mem-a", persons=["甲"])],
        {"mem-a": new("mem-a")},
        cfg=cfg_with({"event": {"mode": "off"}, "person": {"mode": "off"}}),
    )
    assert "events" not in off.changes["mem-a"] and "persons" not in off.changes["mem-a"]
    assert sum(w.startswith("tag-mode-off") for w in off.value["warnings"]) == 2
    timed = run([full("mem-a", eventTime=1)], {"mem-a": new("mem-a")})
    assert any(w.startswith("eventTime-ignored") for w in timed.value["warnings"])


def test_similarity() -> None:
    assert similarity("日本 旅行", "日本旅行") == pytest.approx(0.8)
    assert similarity("旅行经历", "日本旅行") == pytest.approx(1 / 3)
    assert similarity("login refactor", "login refactor project") == pytest.approx(0.8)
    assert similarity("a", "a") == 1.0
    found = candidates(
        "日本 旅行", {"日本旅行": 3, "北京出差": 1}, threshold=0.72, metric="dice", limit=5
    )
    assert [(c.existing, c.score) for c in found] == [("日本旅行", 0.8)]
    counts = label_counts([(["a", "b"], "a"), (None, "b"), (None, None), ([], "c")])
    assert counts == Counter({"a": 1, "b": 2, "c": 1})
    assert existing_label_list(counts, 2) == [("b", 2), ("a", 1)]


def test_merge_candidate_then_approval_across_batches() -> None:
    first = run(
        [full("mem-a", events=["日本 旅行"])], {"mem-a": new("mem-a")}, counts={"日本旅行": 3}
    )
    assert first.changes["mem-a"]["events"] == ["日本 旅行"]  # kept, not merged
    assert first.value["eventStats"]["candidates"] == 1
    assert first.value["eventMergeCandidates"] == [
        {"id": "mem-a", "submitted": "日本 旅行", "existing": "日本旅行", "score": 0.8}
    ]
    assert any(
        w
        == texts.JUDGE_WARN_EVENT_CANDIDATE.format(
            submitted="日本 旅行", existing="日本旅行", score="0.80"
        )
        for w in first.value["warnings"]
    )
    # Approval: re-submit the existing label for the folder that now carries the new one.
    second = run(
        [{"id": "mem-a", "event": "日本旅行"}],
        {"mem-a": review("mem-a", events=("日本 旅行",))},
        counts={"日本旅行": 3, "日本 旅行": 1},
    )
    assert second.changes["mem-a"]["events"] == ["日本旅行"]
    assert second.value["eventStats"] == {"assigned": 1, "merged": 1, "cleared": 0, "candidates": 0}
    assert second.value["eventMergeCandidates"] == []


def test_merge_candidates_within_one_batch() -> None:
    folders = {"mem-a": new("mem-a"), "mem-b": new("mem-b")}
    plan = run([full("mem-a", events=["日本旅行"]), full("mem-b", events=["日本 旅行"])], folders)
    assert plan.changes["mem-b"]["events"] == ["日本 旅行"]
    assert plan.value["eventStats"]["candidates"] == 1
    assert plan.value["eventMergeCandidates"][0]["existing"] == "日本旅行"
    # The same label twice in a batch is an exact hit for the second item.
    same = run([full("mem-a", events=["日本旅行"]), full("mem-b", events=["日本旅行"])], folders)
    assert same.value["eventStats"]["candidates"] == 0


def test_silent_merge_rollback() -> None:
    cfg = cfg_with({"event": {"mergeRequiresApproval": False}})
    folders = {"mem-a": new("mem-a"), "mem-b": new("mem-b")}
    plan = run(
        [full("mem-a", events=["日本旅行"]), full("mem-b", events=["日本 旅行"])], folders, cfg=cfg
    )
    assert plan.changes["mem-b"]["events"] == ["日本旅行"]
    assert plan.value["eventStats"]["merged"] == 1
    assert plan.value["eventMergeCandidates"] == []
