"""Heuristic α / keywords (scoring fallback, engine CLI)."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.heuristic import (
    DEFAULT_WEIGHTS,
    HeuristicScore,
    batch_stats,
    features,
    heuristic_score,
    speaker_labels,
    with_batch,
)
from engine.relevance.analyzer import EN_FILLER
from engine.relevance.stats import BatchStats, CombinedStats, TermStats
from engine.stopwords import is_stopword
from engine.tokenizer import normalize_text

W = DEFAULT_WEIGHTS


def score(text: str, **kw: object) -> HeuristicScore:
    args: dict[str, object] = {
        "weights": W,
        "alpha_min": 0.01,
        "alpha_max": 1.0,
        "keywords_min": 3,
        "keywords_max": 16,
    }
    args.update(kw)
    return heuristic_score(text, **args)  # type: ignore[arg-type]


def folded(keywords: list[str]) -> set[str]:
    return {k.casefold() for k in keywords}


# ---- a two-person chat session: every line starts with a speaker's name ---------------

SESSION = [
    "Mina: Hey Leo! I finally finished my first pottery class, it was awesome!\n"
    "Leo: Wow, great! What did you make in the pottery class?\n"
    "Mina: A small blue vase. The glaze came out uneven but I love it!\n"
    "Leo: Awesome. Will you finish the wheel module next week?\n"
    "Mina: Yes, the teacher says the wheel module is the hardest part.",
    "Leo: I'm planning a trip to Hangzhou in October, any tips?\n"
    "Mina: Wow, great! Hangzhou is lovely, see West Lake at sunrise.\n"
    "Leo: Awesome, and the food?\n"
    "Mina: Try Dongpo pork and Longjing shrimp, they are famous.",
    "Mina: How is Max, your dog?\n"
    "Leo: Great! Max started agility training on Saturdays.\n"
    "Mina: Wow, agility! Does he like the tunnels?\n"
    "Leo: He loves the tunnels but hates the seesaw.",
    "Leo: I decided to switch jobs, I'm joining a startup as a backend engineer.\n"
    "Mina: Wow, great news! When do you start?\n"
    "Leo: On March 3rd. They run Postgres 16 behind port 8443.\n"
    "Mina: Awesome, you always wanted to work on databases.",
    "Mina: Work was crazy today, so many meetings.\n"
    "Leo: Wow, that sounds tiring. Take it easy tonight.\n"
    "Mina: Great idea, maybe a movie.\n"
    "Leo: Awesome, enjoy!",
]


def session_stats() -> TermStats:
    return batch_stats(SESSION)


def test_default_weights_shape() -> None:
    assert isinstance(DEFAULT_WEIGHTS, dict)
    assert set(DEFAULT_WEIGHTS) == {
        "base",
        "decision",
        "agreement",
        "preference",
        "rule",
        "identity",
        "numbers",
        "length",
    }
    assert all(isinstance(v, float) and 0 <= v <= 1 for v in DEFAULT_WEIGHTS.values())


# ---- α ---------------------------------------------------------------------------------


def test_small_talk_is_low_and_two_signals_are_high() -> None:
    chat = score("今天天气不错,随便聊聊。")
    assert chat.alpha < 0.3
    one = score("我喜欢吃川菜")
    assert 0.3 < one.alpha < 0.5
    two = score("我们约定以后都用 8080 端口,必须先灰度 10%。")
    assert two.alpha >= 0.6  # crosses the default θ_H


def test_casual_chat_stays_well_under_half() -> None:
    for folder in SESSION:
        if "decided" in folder:
            continue
        a = score(folder, stats=session_stats()).alpha
        assert 0.1 <= a < 0.35, folder


def test_one_incidental_marker_in_a_long_chat_stays_under_half() -> None:
    small_talk = ["the weather is nice", "see you at the park", "haha yes", "what a day"]
    lines = [f"Mina: {small_talk[i % 4]}, {small_talk[(i + 1) % 4]}" for i in range(19)]
    lines.insert(7, "Leo: we decided to meet at port 8443, I promise")
    text = "\n".join(lines)
    assert features(text)["decision"] == pytest.approx(4 / 20)
    assert score(text).alpha < 0.5
    # the same statement on its own is what lasts
    assert score(lines[7]).alpha >= 0.6


def test_decision_with_a_port_number_crosses_half() -> None:
    assert score("We decided to use port 8443 for the gateway.").alpha >= 0.5
    assert score("We decided to go with Redis.").alpha < 0.5  # one signal
    assert score("From now on, always run the tests before pushing.").alpha >= 0.6


@pytest.mark.parametrize(
    "text",
    [
        "I'm so happy today!",
        "Haha, I love it! I'd love to come.",
        "I love you, I love that, love this!",
        "I don't know, I always forget. I never ask.",
        "You must be tired.",
        "Remember when we went to the beach?",
        "I'm going with my mom.",
        "你确定吗?不要啊。",
    ],
)
def test_chat_phrases_are_not_markers(text: str) -> None:
    f = features(text)
    assert all(f[name] == 0.0 for name in ("decision", "agreement", "preference", "rule"))
    assert f["identity"] == 0.0
    assert score(text).alpha < 0.3


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("My name is Mina and I live in Lisbon.", "identity"),
        ("我叫小明,住在杭州。", "identity"),
        ("I love hiking in the mountains.", "preference"),
        ("My favourite band is Midnight Orchard.", "preference"),
        ("I prefer short commit messages.", "preference"),
        ("我最喜欢吃川菜", "preference"),
        ("You must rebase before merging.", "rule"),
        ("以后所有发布都必须先灰度。", "rule"),
        ("Never ever push to main.", "rule"),
        ("I promise I'll send the report by Friday.", "agreement"),
        ("We settled on Postgres 16.", "decision"),
        ("最后决定用 Redis。", "decision"),
    ],
)
def test_markers_that_last(text: str, marker: str) -> None:
    assert features(text)[marker] == 1.0


def test_features() -> None:
    f = features("We decided: always use port 8080 and v1.2.0, I prefer Redis.")
    assert f["base"] == 1.0
    assert f["decision"] == 1.0
    assert f["rule"] == 1.0
    assert f["preference"] == 1.0
    assert f["agreement"] == 0.0
    assert f["numbers"] == 1.0  # two concrete numbers saturate
    assert features("port 8080")["numbers"] == pytest.approx(0.5)
    assert features("I have 2 kids and 3 cats")["numbers"] == 0.0  # one digit: not a parameter
    assert features("disagree")["agreement"] == 0.0  # Latin cues start a word
    assert features("x" * 4000)["length"] == 1.0


def test_numbers_of_a_log_are_data_not_parameters() -> None:
    log = "\n".join(
        f"2026/11/02 09:{i:02d}:12 [error] upstream 10.0.2.{i} returned 502 port {4000 + i}"
        for i in range(10, 16)
    )
    assert features(log)["numbers"] == pytest.approx(0.25)
    assert score(log).alpha < 0.3


def test_weights_drive_alpha() -> None:
    text = "我们约定以后都用这个方案"
    base = score(text).alpha
    no_agreement = score(text, weights={**W, "agreement": 0.0}).alpha
    assert no_agreement == pytest.approx(base - W["agreement"], abs=1e-4)
    assert score(text, weights={}).alpha == base  # missing weights use the defaults
    bad = score(text, weights={**W, "agreement": math.nan}).alpha
    assert bad == base


def test_alpha_clamped_and_rounded() -> None:
    rich = "我叫小明,我们约定:以后必须用 Redis,我喜欢这个决定,端口 6379、8080、9090。"
    assert score(rich).alpha == 1.0
    assert score(rich, alpha_max=0.8).alpha == 0.8
    assert score("嗯", alpha_min=0.5).alpha == 0.5
    assert score("嗯", alpha_min=0.9, alpha_max=0.3).alpha == 0.3  # reversed range degrades
    a = score("随便聊聊" * 7).alpha
    assert a == round(a, 4)


def test_beta_zero_and_frozen() -> None:
    s = score("我们约定以后都用 8080 端口")
    assert s.beta == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.alpha = 0.5  # type: ignore[misc]


# ---- keywords ----------------------------------------------------------------------------


def test_speaker_names_are_never_keywords() -> None:
    stats = session_stats()
    for folder in SESSION:
        for st_ in (stats, None):
            kws = folded(score(folder, stats=st_).keywords)
            assert not kws & {"mina", "leo"}, (folder, kws)


def test_speaker_labels() -> None:
    assert speaker_labels(SESSION[0]) == {"mina", "leo"}
    # the friend who spoke once is a label too, once the text is a labelled chat
    assert speaker_labels("Mina: hi\nMina: there?\nLeo: yes") == {"mina", "leo"}
    # key: value lines are not a chat
    assert speaker_labels("端口: 8080\n数据库: Postgres\n网关: nginx") == frozenset()
    assert speaker_labels("Note: the port is 8080") == frozenset()
    assert speaker_labels("see https://example.com\nand https://example.org") == frozenset()
    assert "端口" in score("端口: 8080\n数据库: Postgres").keywords


def test_names_shared_by_most_folders_are_dropped_without_labels() -> None:
    folders = [f"hey Mina, {topic} was nice" for topic in ("pottery", "hiking", "jazz", "chess")]
    stats = batch_stats(folders)
    for folder in folders:
        kws = folded(score(folder, stats=stats).keywords)
        assert "mina" not in kws
        assert kws  # the topic word survives
    assert "mina" in folded(score(folders[0]).keywords)  # alone, nothing says it is common


def test_chat_filler_is_never_a_keyword() -> None:
    stats = session_stats()
    filler = {"great", "wow", "awesome", "haha", "lovely", "sounds", "哈哈", "好的"}
    for folder in [*SESSION, "哈哈好的,Great great wow awesome!"]:
        kws = folded(score(folder, stats=stats).keywords)
        assert not kws & filler, kws
        assert not kws & EN_FILLER


def test_inflections_are_one_keyword() -> None:
    kws = score("I finished the report. I finish work at six. Finishing touches.").keywords
    assert sum(1 for k in kws if k.casefold().startswith("finish")) == 1
    assert "finished" in kws  # a real surface word, the first of the most frequent


def test_versions_are_not_merged() -> None:
    kws = score("Upgrade v1.2.0 to v1.3 today; v1.2.0 is broken.").keywords
    assert "v1.2.0" in kws and "v1.3" in kws


def test_every_topic_gets_a_keyword() -> None:
    topic1 = [
        "Mina: The pottery class uses a wheel and clay, the kiln fires the glaze.",
        "Leo: Pottery sounds fun. Does the kiln fire the glaze hot? Clay and wheel too?",
        "Mina: The pottery studio has a kiln, a wheel, glaze buckets and clay bins.",
        "Leo: Studio kiln glaze wheel clay pottery, all of it, nice.",
        "Mina: Teacher shows glaze recipes, trimming tools, studio shelves, kiln schedule.",
        "Leo: Trimming tools and shelves and recipes and schedule, teacher is busy.",
    ]
    topic2 = "Mina: Also my brother booked a flight to Hangzhou for the dragon boat race."
    text = "\n".join([*topic1, topic2])
    words2 = {"brother", "booked", "flight", "hangzhou", "dragon", "boat", "race"}
    for stats in (None, batch_stats([text, *SESSION])):
        kws = folded(score(text, stats=stats).keywords)
        assert kws & words2, kws  # the second topic is findable
        assert {"pottery", "kiln", "glaze"} <= kws


def test_distinctive_beats_frequent_but_shared() -> None:
    folders = [
        f"The project meeting. The project plan. The project {word}."
        for word in ("Hangzhou", "budget", "hiring", "roadmap", "offsite")
    ]
    stats = batch_stats(folders)
    kws = score(folders[0], stats=stats).keywords
    assert kws[0] == "Hangzhou"
    assert "project" not in kws  # in more than half of the folders
    # alone, the frequent word leads: there is nothing to compare with
    assert score(folders[0]).keywords[0] == "project"
    # with fewer than four documents a shared word is only ranked lower, never dropped
    few = batch_stats(folders[:3])
    kws3 = score(folders[0], stats=few).keywords
    assert kws3.index("Hangzhou") < kws3.index("project")


def test_combined_stats_count_the_session() -> None:
    session = BatchStats([["project"]] * 6 + [["potteri"]])
    stats = with_batch(session, ["Hangzhou pottery", "project"])
    assert isinstance(stats, CombinedStats)
    assert stats.docs == 9 and stats.df("potteri") == 2 and stats.df("project") == 7
    assert isinstance(with_batch(None, ["x"]), BatchStats)
    # "project" is in 7 of 9 documents: never a keyword; "pottery" is
    kws = score("Hangzhou pottery project", stats=stats).keywords
    assert "project" not in kws and "pottery" in kws


def test_contained_words_are_not_repeated() -> None:
    kws = score("陶艺课很好玩\n陶艺课在周六\n下次的陶艺").keywords
    assert "陶艺课" in kws
    assert "陶艺" not in kws  # already matched through 陶艺课


def test_protocol_lines_are_not_keywords() -> None:
    text = 'Let me read the nginx log.\n[tool-call bash {"cmd":"tail -n 120 error.log"}]'
    kws = folded(score(text).keywords)
    assert "nginx" in kws
    assert not kws & {"bash", "cmd", "tool-call"}


def test_keywords_within_bounds() -> None:
    text = " ".join(f"term{i:02d}" for i in range(30)) + " 星港项目的接口网关端口是 8080"
    s = score(text)
    assert 3 <= len(s.keywords) <= 16
    assert len(score(text, keywords_max=5).keywords) == 5


def test_keywords_padded_with_edge_bigrams() -> None:
    assert score("我喜欢吃川菜").keywords == ["喜欢吃川菜", "喜欢", "川菜"]


def test_keywords_never_invented() -> None:
    assert score("你好").keywords == []
    assert score("hello world").keywords == ["world"]


def test_extra_stopwords_apply_to_keywords() -> None:
    s = score("Redis 集群 端口 网关", extra_stopwords=["redis"])
    assert "Redis" not in s.keywords
    assert s.keywords == ["集群", "端口", "网关"]


def test_deterministic() -> None:
    stats = session_stats()
    first = [score(f, stats=stats) for f in SESSION]
    again = [score(f, stats=batch_stats(list(SESSION))) for f in SESSION]
    assert first == again
    # ties keep first occurrence
    assert score("alpha bravo charlie delta").keywords == ["alpha", "bravo", "charlie", "delta"]


_TEXT = st.lists(
    st.one_of(
        st.sampled_from(
            ["约定", "必须", "喜欢", "决定", "我叫", "8080", "v1.2", "Redis", "。", "\n", "Mina: "]
        ),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
        st.characters(),
    ),
    max_size=60,
).map("".join)
_W = st.floats(min_value=-2, max_value=2, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    _TEXT,
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=1.0),
    st.integers(min_value=0, max_value=8),
    st.integers(min_value=0, max_value=20),
    st.dictionaries(st.sampled_from(sorted(DEFAULT_WEIGHTS)), _W),
    st.lists(_TEXT, max_size=5),
)
def test_heuristic_invariants(
    text: str,
    a: float,
    b: float,
    kmin: int,
    kmax: int,
    weights: dict[str, float],
    others: list[str],
) -> None:
    lo, hi = min(a, b), max(a, b)
    stats = batch_stats([text, *others]) if others else None
    score = partial(
        heuristic_score,
        text,
        weights={**W, **weights},
        alpha_min=lo,
        alpha_max=hi,
        keywords_min=kmin,
        keywords_max=kmax,
        stats=stats,
    )
    s = score()
    assert s == score()  # deterministic
    assert round(lo, 4) <= s.alpha <= round(hi, 4) or lo <= s.alpha <= hi
    assert s.beta == 0.0
    assert len(s.keywords) <= kmax
    assert len(set(folded(s.keywords))) == len(s.keywords)
    norm = normalize_text(text).casefold()
    for kw in s.keywords:
        assert kw.casefold() in norm
        assert not is_stopword(kw)
