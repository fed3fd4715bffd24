"""The task block's fast paths against the slow computations they replaced.

The estimate, the cut by tokens, the water-filling cap and the ordering are computed
once per text / in one pass now; the oracles below are the previous implementations
(a regex over the whole text per estimate, a binary search of estimates per cut and per
cap, a full sort per listing). On random texts (ASCII, CJK, kana, hangul, emoji with
joiners and variation selectors, supplementary ideographs, lone and paired surrogates)
every result, and the rendered block byte for byte, must be the same. The readable
text's kind (decision / user) asks two cue markers directly instead of computing every
heuristic feature; it must answer what the features say.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.heuristic import features, has_cue
from engine.scoring import task_block
from engine.scoring.budget import (
    estimate_tokens,
    longest_prefix,
    safe_slice,
    slice_to_tokens,
    to_well_formed,
)
from engine.scoring.task_block import (
    PendingItem,
    ReviewItem,
    TaskBlock,
    TaskBlockInput,
    cap_for,
    first_in_order,
    order_pending,
    render_task_block,
)
from engine.tokenizer import CJK_CLASS

# ---- the previous implementations (oracles) -------------------------------------------

_OLD_WIDE = re.compile(f"[{CJK_CLASS}]|[^\\x00-\\x7f]")


def old_estimate(text: str) -> int:
    if not text:
        return 0
    wide = len(_OLD_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


def old_slice(text: str, tokens: int) -> str:
    if tokens <= 0:
        return ""
    if old_estimate(text) <= tokens:
        return to_well_formed(text)
    lo, hi = 0, min(len(text), tokens * 4)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old_estimate(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return safe_slice(text, lo)


def old_cap(heads: int, bodies: Sequence[int], share: int) -> int:
    if heads > share:
        return -1
    lo, hi = 0, max(bodies)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if heads + sum(min(b, mid) for b in bodies) <= share:
            lo = mid
        else:
            hi = mid - 1
    return lo


def old_cap_for(items: Sequence[Any], share: int) -> int:
    return old_cap(sum(r.head_tokens for r in items), [r.body_tokens for r in items], share)


def slow_render(inp: TaskBlockInput) -> TaskBlock:
    """The task block as the slow versions (the references above) render it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(task_block, "estimate_tokens", old_estimate)
        mp.setattr(task_block, "slice_to_tokens", old_slice)
        mp.setattr(task_block, "_cap_for", old_cap_for)
        return render_task_block(inp)


# ---- strategies --------------------------------------------------------------------------

_SPECIAL = [
    "a",
    " ",
    "\n",
    "字",
    "の",
    "한",
    "😀",
    "👨\u200d👩\u200d👧",
    "\u200d",
    "\ufe0f",
    "\ufe0e",
    "❤\ufe0f",
    "𠮷",
    "\ud83d",  # lone high surrogate
    "\ude00",  # lone low surrogate
    "\ud83d\ude00",  # a pair as two code points (JSON escapes decoded unit by unit)
    "é",
    "\x7f",
    "\x80",
]
pieces = st.one_of(
    st.sampled_from(_SPECIAL),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    st.text(alphabet="abcdefghij klmnop,.", min_size=1, max_size=40),
    st.text(alphabet="记忆评分任务的归档对话内容", min_size=1, max_size=30),
)
texts = st.lists(pieces, max_size=60).map("".join)


# ---- the arithmetic ----------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(texts)
def test_estimate_matches_the_regex_estimate(text: str) -> None:
    assert estimate_tokens(text) == old_estimate(text)


@settings(max_examples=400, deadline=None)
@given(texts, st.integers(min_value=-2, max_value=400))
def test_cut_by_tokens_matches_the_binary_search(text: str, tokens: int) -> None:
    assert slice_to_tokens(text, tokens) == old_slice(text, tokens)
    if tokens > 0:
        m = longest_prefix(text, tokens)
        assert old_estimate(text[:m]) <= tokens
        assert m == min(len(text), tokens * 4) or old_estimate(text[: m + 1]) > tokens


def test_cut_of_long_texts_crosses_many_blocks() -> None:
    text = ("配置文件 config.yaml 😀 " * 400) + "\ud83d" + ("x" * 3000) + "字" * 500
    for tokens in (1, 7, 60, 255, 256, 257, 1000, 2999, 5000, 10_000):
        assert slice_to_tokens(text, tokens) == old_slice(text, tokens)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(min_value=0, max_value=300),
    st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=30),
    st.integers(min_value=-5, max_value=6000),
)
def test_cap_matches_the_binary_search(heads: int, bodies: list[int], share: int) -> None:
    assert cap_for(heads, bodies, share) == old_cap(heads, bodies, share)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10**6)), unique=True, max_size=40),
    st.sampled_from(["newest", "oldest", "mixed", "something-else"]),
    st.integers(min_value=0, max_value=60),
)
def test_first_in_order_is_the_head_of_the_full_ordering(
    keys: list[tuple[int, int]], order: str, limit: int
) -> None:
    items = [(since, f"mem-{n:07d}") for since, n in keys]
    oldest_first = sorted(items)
    assert (
        first_in_order(oldest_first, order, limit)
        == (order_pending(items, order, lambda it: it)[:limit])
    )


# ---- the rendered block -------------------------------------------------------------------

NOW = 1_796_000_000_000

pending_items = st.builds(
    PendingItem,
    id=st.integers(0, 9999).map(lambda n: f"mem-20261118T11{n:04d}Z-0001"),
    title=texts,
    kind=st.sampled_from(["user", "decision", "tool"]),
    since_ms=st.integers(NOW - 10 * 86_400_000, NOW + 1000),
    text=texts,
)
review_items = st.builds(
    ReviewItem,
    id=st.integers(0, 9999).map(lambda n: f"mem-20261101T00{n:04d}Z-0001"),
    title=texts,
    alpha=st.floats(0.01, 1),
    beta=st.floats(-10, 10),
    keywords=st.lists(texts, max_size=4),
    reason=texts,
    text=texts,
)


@settings(max_examples=250, deadline=None)
@given(
    st.lists(pending_items, max_size=12),
    st.lists(review_items, max_size=8),
    st.lists(st.tuples(texts, st.integers(1, 9)), max_size=5),
    st.integers(min_value=0, max_value=3000),
    st.booleans(),
    st.data(),
)
def test_block_is_byte_identical_to_the_slow_computation(
    pending: list[PendingItem],
    review: list[ReviewItem],
    labels: list[tuple[str, int]],
    budget: int,
    channel: bool,
    data: st.DataObject,
) -> None:
    inp = TaskBlockInput(
        pending=pending,
        review=review,
        labels=labels,
        has_recall_block=data.draw(st.booleans()),
        now_ms=NOW,
        budget_tokens=budget,
        pending_total=len(pending) + data.draw(st.integers(0, 5)),
        review_total=len(review) + data.draw(st.integers(0, 5)),
        channel=channel,
    )
    assert render_task_block(inp) == slow_render(inp)


def test_many_long_items_under_a_small_budget() -> None:
    """The path that truncates and then omits: 100 long items, tight budgets."""
    body = "user: " + "第一个问题：请帮我看看配置文件。" * 40 + "\nassistant: " + "ok " * 300
    pending = [
        PendingItem(f"mem-20261118T11{i:04d}Z-0001", f"标题{i}", "user", NOW - i, body[i:])
        for i in range(100)
    ]
    review = [
        ReviewItem(f"mem-20261101T00{i:04d}Z-0001", f"复核{i}", 0.5, 1, ["甲"], "", body[:i])
        for i in range(100)
    ]
    for budget in (0, 500, 2400, 6000, 12_000, 50_000):
        inp = TaskBlockInput(pending, review, [("日本旅行", 3)], False, NOW, budget)
        fast = render_task_block(inp)
        assert fast == slow_render(inp)
        assert fast.text.encode("utf-8")  # never a lone surrogate in the model's text


# ---- the readable text's kind ----------------------------------------------------------

_CUES = [
    "决定",
    "我们定了",
    "约定",
    "We DECIDED to",
    "ＤＥＣＩＤＥＤ",  # full width: NFKC makes it a cue
    "let's go with",
    "undecided",
    "disagreed",
    "agreed",
    "remember to",
    "I prefer tea",
    "必须",
    "我叫",
    "\r\n",
    "\n",
    "\u200b",
    "ok",
]
cue_texts = st.lists(st.one_of(st.sampled_from(_CUES), pieces), max_size=20).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(cue_texts)
def test_cue_test_matches_the_features(text: str) -> None:
    feats = features(text)
    for names in (("decision",), ("agreement",), ("decision", "agreement"), ("rule", "identity")):
        assert has_cue(text, names) == any(feats[name] > 0 for name in names)
