"""Category keywords for high-α memories (reference §1.2 v1.4.1 point, §3.0.4).

rofm recall is literal keyword matching, so an abstract question ("我的喜好是什么") only
finds a preference memory when one of its keywords is the category word. When a
submitted α ≥ ``scoring.categoryKeyword.alphaMin`` and the submitted keywords hold no
word of ``scoring.categoryKeyword.words``, the category is recognised from the archived
text by fixed cue lists (「喜欢/偏好/讨厌…」→ 喜好, 「约定/以后/不要/必须…」→ 约定, …):
the cue that occurs first in the text wins, ties go to the order below. Only words of the
configured list are ever added; a text without cues gets no invented category.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

CATEGORY_CUES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (
        "喜好",
        ("喜欢", "喜好", "偏好", "爱好", "口味", "最爱", "爱吃", "爱喝", "讨厌", "厌恶", "不爱"),
    ),
    ("习惯", ("习惯", "通常", "每天都", "总是", "一般都")),
    (
        "约定",
        ("约定", "说好", "以后都", "以后", "下次", "不要", "别再", "必须", "记住", "一言为定"),
    ),
    ("承诺", ("承诺", "答应", "保证")),
    ("决定", ("决定", "确定", "敲定", "拍板", "选定", "定了", "采用", "改用")),
    ("规则", ("规则", "规定", "一律", "原则", "规范")),
    ("要求", ("要求", "务必", "需要你", "一定要")),
    ("禁忌", ("禁忌", "忌口", "过敏", "不能吃", "禁止", "不许", "不准")),
)
"""Cue words per category label (rofm's lists, headed by the reference's examples)."""

CATEGORY_KIND: Final[dict[str, str]] = {
    "喜好": "偏好",
    "偏好": "偏好",
    "习惯": "习惯",
    "约定": "约定",
    "承诺": "约定",
    "决定": "决定",
    "规则": "规则",
    "要求": "规则",
    "禁忌": "规则",
}
"""The kind named in warnings (偏好/习惯/约定/决定/规则)."""


@dataclass(frozen=True, slots=True)
class CategoryOutcome:
    """What the guarantee did to one keyword list."""

    action: str  # "none" | "added" | "replaced" | "missing"
    keywords: list[str]
    word: str = ""
    replaced: str = ""


def has_category_word(keywords: Sequence[str], words: Sequence[str]) -> bool:
    """A keyword is, or contains, a configured category word."""
    return any(w and w in k for k in keywords for w in words)


def detect_category(text: str, words: Sequence[str]) -> str:
    """The category word the text shows first, limited to ``words``; "" when none."""
    allowed = set(words)
    best: tuple[int, int, str] | None = None
    for order, (label, cues) in enumerate(CATEGORY_CUES):
        if label not in allowed:
            continue
        for cue in cues:
            pos = text.find(cue)
            if pos != -1 and (best is None or (pos, order) < best[:2]):
                best = (pos, order, label)
    return best[2] if best is not None else ""


def ensure_category(
    keywords: Sequence[str], text: str, *, words: Sequence[str], max_keywords: int
) -> CategoryOutcome:
    """Add (or swap in for the last keyword) the recognised category word."""
    kws = list(keywords)
    if has_category_word(kws, words):
        return CategoryOutcome("none", kws)
    word = detect_category(text, words)
    if not word:
        return CategoryOutcome("missing", kws)
    if len(kws) < max_keywords:
        return CategoryOutcome("added", [*kws, word], word)
    old = kws[-1]
    return CategoryOutcome("replaced", [*kws[:-1], word], word, old)
