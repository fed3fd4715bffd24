"""memory_recall's engine: keyword splitting, arguments, selection per mode, pagination,
the lane commit, the answer text and the strikes (engine.recall.search*, strikes)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import texts
from engine.config import MemoryConfig
from engine.recall import Addition, CandidateIndex, RecallState
from engine.recall.fair import Pick
from engine.recall.search import (
    PAGE_WINDOW,
    SearchPage,
    commit_search,
    keyword_query,
    load_entries,
    search,
)
from engine.recall.search_answer import render_answer
from engine.recall.search_args import parse_search_args, split_keywords
from engine.recall.state import Lanes
from engine.recall.strikes import RecallStrikes
from engine.relevance.index import RelevanceIndex
from tests.engine.recall_fixtures import (
    BASE_MS,
    Entry,
    addition_of,
    config,
    new_store,
    tool_search,
    with_tz,
    write_folders,
)

MODES = ("ranked", "fair", "deterministic")


# ---- keywords and arguments ----------------------------------------------------------


def test_keywords_split_on_every_separator_deduplicated_in_order() -> None:
    raw = "星港项目 网关,端口，灰度、发布;窗口；网关\u3000Redis  redis"
    assert split_keywords(raw, expand_latin_case=False) == [
        "星港项目",
        "网关",
        "端口",
        "灰度",
        "发布",
        "窗口",
        "Redis",
        "redis",
    ]
    # with case folding, Redis and redis are one keyword (the first spelling stays)
    assert split_keywords(raw, expand_latin_case=True)[-1] == "Redis"
    assert split_keywords(["a b", "b", "c"], expand_latin_case=False) == ["a", "b", "c"]


def test_more_than_sixteen_keywords_keep_the_first_sixteen_with_a_warning() -> None:
    cfg = config()
    words = [f"词{i}" for i in range(18)]
    args = parse_search_args({"keywords": " ".join([*words, "词0"])}, cfg)
    assert args.keywords == tuple(words[:16])
    assert args.warnings == (
        texts.RECALL_TOOL_WARN_KEYWORDS_CAP.format(n=18, dropped="词16、词17"),
    )
    assert parse_search_args({"keywords": " ".join(words[:16])}, cfg).warnings == ()


@pytest.mark.parametrize(
    ("given", "limit", "warned"),
    [
        (None, 3, False),
        (1, 1, False),
        (20, 20, False),
        (0, 1, True),
        (25, 20, True),
        (-4, 1, True),
        ("5", 5, False),
        (4.0, 4, False),
        (2.7, 2, True),
        ("many", 3, True),
        (True, 3, True),
    ],
)
def test_limit_is_clamped_to_one_to_twenty(given: Any, limit: int, warned: bool) -> None:
    args = parse_search_args({"keywords": "网关", "limit": given}, config())
    assert args.limit == limit and args.error is None
    assert bool(args.warnings) == warned
    assert not args.paginated


def test_offset_makes_a_call_paginated_and_is_clamped() -> None:
    cfg = config()
    assert parse_search_args({"keywords": "a", "offset": 0}, cfg).paginated
    assert parse_search_args({"keywords": "a", "offset": None}, cfg).offset is None
    big = parse_search_args({"keywords": "a", "offset": 10_001}, cfg)
    assert big.offset == 10_000
    assert big.warnings == (texts.RECALL_TOOL_WARN_OFFSET.format(given=10_001, used=10_000),)
    assert parse_search_args({"keywords": "a", "offset": -1}, cfg).offset == 0


def test_filters_of_later_features_are_answered_not_ignored() -> None:
    cfg = config()
    args = parse_search_args(
        {"keywords": "网关", "event": "空", "events": [], "assistantSaid": True}, cfg
    )
    assert args.unsupported == () and not args.has_tags  # 「空」 and [] ask for nothing
    assert args.assistant_said is True  # a real parameter since issue 13: no warning
    assert args.warnings == ()
    only = parse_search_args({"persons": ["小明"], "locations": "我家"}, cfg)
    assert only.error is None and only.keywords == () and only.warnings == ()
    assert only.persons == ("小明",) and only.locations == ("家",)  # constraints (issue 12)
    bad = parse_search_args({"keywords": "网关", "persons": [1]}, cfg)
    assert bad.persons == ()
    assert bad.warnings == (texts.RECALL_TOOL_WARN_LABELS.format(field="persons", given="[1]"),)


def test_no_keywords_and_no_filter_or_a_bad_type_is_refused() -> None:
    cfg = config()
    for arguments in ({}, {"keywords": " ,、 "}, {"event": "空"}):
        assert parse_search_args(arguments, cfg).error == texts.RECALL_TOOL_NEED_KEYWORDS
    for bad in ({"a": 1}, [{"a": 1}], False):
        assert parse_search_args({"keywords": bad}, cfg).error == texts.RECALL_TOOL_BAD_KEYWORDS
    assert parse_search_args({"keywords": 8080}, cfg).keywords == ("8080",)


# ---- selection and pagination --------------------------------------------------------


class Lab:
    """Folders in memory (entries + texts) for every mode, a state, and a loader."""

    def __init__(self, entries: list[Entry], cfg: MemoryConfig) -> None:
        self.entries = entries
        self.cfg = cfg
        self.index = CandidateIndex(entries, cfg, 1)
        self.texts = {e.id: " ".join(e.keywords) for e in entries}
        self.relevance = RelevanceIndex(self.texts.__getitem__)
        self.relevance.sync(entries)
        self.state = RecallState(persist=False)

    def page(self, keywords: str, *, limit: int = 3, offset: int | None = None) -> SearchPage:
        return search(
            self.index,
            self.state,
            keyword_query(keywords.split(), self.cfg),
            self.cfg,
            limit=limit,
            offset=offset,
            relevance=self.relevance,
            session_key="lab",
        )

    def ids(self, keywords: str, **kw: Any) -> list[str]:
        return [p.id for p in self.page(keywords, **kw).picks]

    def load(self, p: Pick) -> Addition:
        return addition_of(self.index.folders[p.n])


def _entries(alphas: list[float], keyword: str = "网关") -> list[Entry]:
    return [
        Entry(f"mem-{i:04d}", a, BASE_MS + i * 1000, [keyword, f"k{i}"])
        for i, a in enumerate(alphas)
    ]


@settings(max_examples=40, deadline=None)
@given(
    alphas=st.lists(st.sampled_from([0.1, 0.3, 0.55, 0.6, 0.8, 0.95]), min_size=1, max_size=25),
    block=st.integers(min_value=0, max_value=3),
    ledger=st.integers(min_value=0, max_value=3),
    limit=st.integers(min_value=1, max_value=7),
    mode=st.sampled_from(MODES),
)
def test_pages_are_disjoint_complete_and_exact(
    alphas: list[float], block: int, ledger: int, limit: int, mode: str
) -> None:
    lab = Lab(_entries(alphas), config(mode=mode))
    in_block = [f"mem-{i:04d}" for i in range(min(block, len(alphas)))]
    lab.state.additions = [Addition(fid, 0.5, 0.0, BASE_MS) for fid in in_block]
    for i in range(len(alphas) - 1, len(alphas) - 1 - ledger, -1):
        if i >= 0:
            lab.state.ledger[f"mem-{i:04d}"] = [0.0, alphas[i]]
    lab.state.lanes.cursor = (0.3, BASE_MS + 5000, "mem-0005")
    before = copy.deepcopy(lab.state.to_json())
    everything = lab.ids("网关", limit=100, offset=0)
    assert not set(everything) & set(in_block)  # the block is excluded
    assert len(everything) == len(alphas) - len(in_block)  # the ledger is not
    seen: list[str] = []
    offset = 0
    while True:
        page = lab.page("网关", limit=limit, offset=offset)
        assert page.paginated and len(page.picks) <= limit
        seen += [p.id for p in page.picks]
        assert page.has_more == (offset + limit < len(everything))
        if not page.has_more:
            assert page.next_offset is None
            break
        assert page.next_offset == offset + limit
        offset = page.next_offset
    assert seen == everything  # disjoint, complete, in one stable order
    assert lab.state.to_json() == before  # nothing advanced


def test_each_mode_orders_pages_as_its_automatic_recall() -> None:
    alphas = [0.3, 0.95, 0.8, 0.1, 0.6]
    det = Lab(_entries(alphas), config(mode="deterministic"))
    assert det.ids("网关", limit=5, offset=0) == [
        "mem-0001",
        "mem-0002",
        "mem-0004",
        "mem-0000",
        "mem-0003",
    ]  # σ: α desc, createdAt asc
    fair = Lab(_entries(alphas), config(mode="fair"))
    # high α by σ first, then low α in the rotation order (α asc, createdAt desc)
    assert fair.ids("网关", limit=5, offset=0) == [
        "mem-0001",
        "mem-0002",
        "mem-0004",
        "mem-0003",
        "mem-0000",
    ]
    # a rare keyword puts its high-α folder first (rareHigh), its low one first among low
    rare = Lab(
        [*_entries(alphas), Entry("mem-0100", 0.7, BASE_MS, ["网关", "稀有"])], config(mode="fair")
    )
    page = rare.page("网关 稀有", limit=6, offset=0)
    assert page.picks[0].id == "mem-0100" and page.picks[0].lane == "rareHigh"


def test_ranked_pages_follow_relevance_and_unpaginated_equals_the_first_page() -> None:
    entries = [
        Entry("mem-a", 0.5, BASE_MS, ["网关"]),
        Entry("mem-b", 0.5, BASE_MS + 1, ["网关", "端口"]),
        Entry("mem-c", 0.9, BASE_MS + 2, ["端口"]),
    ]
    lab = Lab(entries, config(mode="ranked"))
    lab.texts.update({"mem-a": "网关", "mem-b": "网关 端口 网关 端口", "mem-c": "端口"})
    lab.relevance = RelevanceIndex(lab.texts.__getitem__)
    lab.relevance.sync(entries)
    first = lab.ids("网关 端口", limit=1, offset=0)
    assert first == ["mem-b"]
    assert lab.ids("网关 端口", limit=1) == first
    assert lab.ids("网关 端口", limit=3, offset=0)[0] == "mem-b"


def test_a_ranked_search_makes_the_keyword_candidates_only_for_its_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = [Entry("mem-a", 0.5, BASE_MS, ["网关"]), Entry("mem-b", 0.5, BASE_MS + 1, ["端口"])]
    lab = Lab(entries, config(mode="ranked"))
    lab.texts.update({"mem-a": "网关 配置", "mem-b": "端口 配置"})
    lab.relevance = RelevanceIndex(lab.texts.__getitem__)
    lab.relevance.sync(entries)
    made: list[str] = []
    real = CandidateIndex.match

    def match(self: CandidateIndex, query: Any, **kw: Any) -> Any:
        made.append(query.text)
        return real(self, query, **kw)

    monkeypatch.setattr(CandidateIndex, "match", match)
    assert lab.ids("网关", limit=2, offset=0) == ["mem-a"]
    assert made == []
    page = lab.page("量子", limit=2, offset=0)  # scores nothing: the keyword fallback
    assert page.picks == [] and len(made) == 1


def test_unpaginated_calls_exclude_the_ledger_and_fair_commits_what_it_showed() -> None:
    lab = Lab(_entries([0.9, 0.8, 0.2, 0.1]), config(mode="fair"))
    lab.state.ledger["mem-0000"] = [0.0, 0.9]
    page = lab.page("网关", limit=1)
    assert not page.paginated
    assert [p.id for p in page.picks] == ["mem-0001"]  # best high α not in the ledger
    shown, _ = load_entries(None, page.picks, lab.cfg, lab.load)
    assert commit_search(lab.state, page, [p for p, _ in shown], lab.index, lab.cfg)
    assert "mem-0001" in lab.state.ledger
    low = lab.page("网关", limit=2)
    assert [p.id for p in low.picks] == ["mem-0003", "mem-0002"]  # rotation order
    assert commit_search(lab.state, low, low.picks, lab.index, lab.cfg)
    assert lab.state.lanes.cursor == (0.2, BASE_MS + 2000, "mem-0002")
    nothing = lab.page("网关", limit=3)
    assert nothing.picks == [] and nothing.miss_type == "excluded"
    assert (nothing.in_block, nothing.surfaced) == (0, 4)
    # a paginated call still sees all of them, and commits nothing
    paged = lab.page("网关", limit=4, offset=0)
    assert len(paged.picks) == 4
    assert not commit_search(lab.state, paged, paged.picks, lab.index, lab.cfg)


def test_a_limit_of_one_in_fair_mode_still_finds_the_best_high_alpha() -> None:
    """k = 1 leaves the high lanes no slot (k_H = 0); the rest of the order fills it."""
    lab = Lab(_entries([0.2, 0.95, 0.7]), config(mode="fair"))
    assert lab.ids("网关", limit=1) == ["mem-0001"]


def test_ranked_and_deterministic_commit_nothing_but_the_ledger_where_they_keep_one() -> None:
    ranked = Lab(_entries([0.9, 0.5]), config(mode="ranked"))
    page = ranked.page("网关", limit=2)
    assert not commit_search(ranked.state, page, page.picks, ranked.index, ranked.cfg)
    assert ranked.state.to_json() == RecallState(persist=False).to_json()
    det = Lab(_entries([0.9, 0.5]), config(mode="deterministic"))
    page = det.page("网关", limit=1)
    assert commit_search(det.state, page, page.picks, det.index, det.cfg)
    assert set(det.state.ledger) == {"mem-0000"} and det.state.lanes == Lanes()


def test_min_alpha_and_recall_off() -> None:
    for mode in (*MODES, "legacy"):
        lab = Lab(_entries([0.9, 0.2, 0.4]), config(mode=mode, minAlpha=0.5, seed=7))
        assert set(lab.ids("网关", limit=5, offset=0)) <= {"mem-0000"}
    off = Lab(_entries([0.9]), config(firstGenMax=0))
    page = off.page("网关", offset=0)
    assert page.picks == [] and not page.has_more and page.miss_type == "off"
    assert off.state.to_json() == RecallState(persist=False).to_json()


def test_miss_types() -> None:
    lab = Lab(_entries([0.9, 0.5]), config(mode="deterministic"))
    assert lab.page("没有这个词").miss_type == "keyword"
    assert lab.page("网关", limit=2, offset=2).miss_type == "offset"
    lab.state.additions = [Addition(f"mem-{i:04d}", 0.5, 0.0, BASE_MS) for i in range(2)]
    excluded = lab.page("网关")
    assert excluded.miss_type == "excluded" and excluded.in_block == 2


def test_the_window_caps_a_paginated_order() -> None:
    assert PAGE_WINDOW == 10_000
    lab = Lab(_entries([0.5] * 5), config(mode="deterministic"))
    last = lab.page("网关", limit=3, offset=10_000)
    assert last.picks == [] and not last.has_more


def test_legacy_ignores_offset_and_keeps_the_bare_date(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    write_folders(
        store,
        [{"createdAt": BASE_MS, "alpha": 1.0, "keywords": ["网关"], "messages": []}],
    )
    cfg = with_tz(config(mode="legacy", computeDates=True), "Asia/Shanghai")
    index = CandidateIndex(store.index, cfg, 1)
    state = RecallState(persist=False)
    page = search(index, state, keyword_query(["网关"], cfg), cfg, limit=3, offset=4)
    assert not page.paginated and page.warnings == [texts.RECALL_TOOL_WARN_LEGACY_OFFSET]
    entries, _ = load_entries(store, page.picks, cfg)
    args = parse_search_args({"keywords": "网关", "offset": 4}, cfg)
    text = render_answer(args, page, entries, cfg).text
    assert "### 回忆 1 · 2026-10-25 08:17 · α=1.00" in text and "归档于" not in text
    assert texts.RECALL_TOOL_WARN_LEGACY_OFFSET in text


# ---- the answer ----------------------------------------------------------------------


def _folders(tmp_path: Path, n: int) -> tuple[Any, list[str]]:
    store = new_store(tmp_path)
    ids = write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + i * 60_000,
                "alpha": 0.9 - i * 0.01,
                "beta": 8,
                "keywords": ["星港项目", f"参数{i}"],
                "messages": [
                    {"role": "user", "content": f"星港项目的参数{i}是 {i}。[图片：（p{i}.png）]"}
                ],
                "events": ["星港发布"],
            }
            for i in range(n)
        ],
    )
    return store, ids


def _answer(store: Any, cfg: MemoryConfig, arguments: dict[str, Any]) -> Any:
    args = parse_search_args(arguments, cfg)
    index = CandidateIndex(store.index, cfg, 1)
    page = tool_search(index, args, cfg)
    entries, _ = load_entries(store, page.picks, cfg)
    return render_answer(args, page, entries, cfg)


def test_entries_are_the_blocks_entries_after_the_full_page_hint(tmp_path: Path) -> None:
    store, ids = _folders(tmp_path, 4)
    cfg = with_tz(config(mode="deterministic", computeDates=True, showTags=True), "Asia/Shanghai")
    answer = _answer(store, cfg, {"keywords": "星港项目", "limit": 2})
    text = answer.text
    lines = text.split("\n")
    assert lines[0] == texts.RECALL_TOOL_HEADING
    assert lines[1] == texts.RECALL_TOOL_COUNT.format(
        keywords="星港项目", found=2, offset=0, limit=2
    )
    assert lines[2] == texts.RECALL_TOOL_FULL_PAGE.format(limit=2, found=2)
    assert lines[4].startswith(
        "### 回忆 1 · 归档于 2026-10-25 周日 08:17 · α=0.90 · β=+8.0 · 第1代"
    )
    assert lines[5] == "事件：星港发布"
    image = store.image_path("p0.png")
    assert lines[6] == f"user: 星港项目的参数0是 0。[图片：（p0.png，文件：{image}）]（缺失）"
    assert texts.RECALL_TOOL_MORE.format(next=2) in text
    assert text.index("### 回忆 2 · ") < text.index(texts.RECALL_TOOL_MORE.format(next=2))
    assert text.endswith(texts.RECALL_TOOL_TRUST_NOTE + "\n" + texts.RECALL_BLOCK_TIME_RULE)
    value = answer.value
    assert value["ids"] == ids[:2] and value["found"] == 2
    assert value["page"] == {"offset": 0, "limit": 2, "hasMore": True, "nextOffset": 2}
    assert value["added"][0]["alpha"] == 0.9 and value["missType"] is None
    # the second page numbers on
    second = _answer(store, cfg, {"keywords": "星港项目", "limit": 2, "offset": 2}).text
    assert "### 回忆 3 · " in second and "### 回忆 1 · " not in second
    assert texts.RECALL_TOOL_MORE.format(next=4) not in second


def test_full_page_hint_variants_and_its_absence(tmp_path: Path) -> None:
    store, _ = _folders(tmp_path, 21)
    cfg = config(mode="deterministic")
    at_max = _answer(store, cfg, {"keywords": "星港项目", "limit": 20}).text
    assert texts.RECALL_TOOL_FULL_PAGE_AT_MAX.format(limit=20, found=20) in at_max
    short = _answer(store, cfg, {"keywords": "参数3", "limit": 5}).text
    assert "本页已满" not in short
    miss = _answer(store, cfg, {"keywords": "不存在", "limit": 1}).text
    assert "本页已满" not in miss
    assert miss.split("\n")[2] == texts.RECALL_TOOL_MISS.format(keywords="不存在")


# ---- strikes -------------------------------------------------------------------------


def test_strikes_warn_from_the_third_and_disable_at_the_sixth() -> None:
    s = RecallStrikes()
    levels = []
    for _ in range(6):
        s.record("fair", 0, "keyword")
        levels.append((s.misses, s.warn, s.disabled))
    assert levels == [
        (1, False, False),
        (2, False, False),
        (3, True, False),
        (4, True, False),
        (5, True, False),
        (6, False, True),
    ]
    s.reset()
    assert (s.misses, s.disabled) == (0, False)


def test_only_keyword_misses_count_and_a_hit_clears() -> None:
    s = RecallStrikes()
    for miss in ("excluded", "offset", "off", "unreadable", None):
        s.record("ranked", 0, miss)
    assert s.misses == 0
    s.record("ranked", 0, "keyword")
    s.record("ranked", 0, "keyword")
    s.record("ranked", 2, None)
    assert s.misses == 0
    # legacy keeps v1.3.0's rule: any empty search counts, its dice included
    for miss in ("keyword", "excluded", "chance"):
        s.record("legacy", 0, miss)
    assert s.misses == 3
    s.record("legacy", 0, "off")
    assert s.misses == 3


def test_the_strike_texts_in_the_answer(tmp_path: Path) -> None:
    cfg = config()
    args = parse_search_args({"keywords": "没有"}, cfg)
    page = SearchPage("fair", False, 0, 3, miss_type="keyword")
    s = RecallStrikes(misses=3)
    text = render_answer(args, page, [], cfg, strikes=s).text
    assert text.endswith(texts.RECALL_TOOL_STRIKE_WARN + texts.RECALL_TOOL_ASK_TIME_EVENT)
    s = RecallStrikes(misses=6, disabled=True)
    answer = render_answer(args, page, [], cfg, strikes=s)
    assert answer.is_error
    assert answer.text.endswith(
        texts.RECALL_TOOL_STRIKE_DISABLED + texts.RECALL_TOOL_ASK_TIME_EVENT
    )
    no_event = cfg.model_copy(
        update={"event": cfg.event.model_copy(update={"ask_user_hint": False})}
    )
    text = render_answer(args, page, [], no_event, strikes=RecallStrikes(misses=4)).text
    assert text.endswith(texts.RECALL_TOOL_STRIKE_WARN + texts.RECALL_TOOL_ASK_TIME)
