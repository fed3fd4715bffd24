"""Heuristic importance (α) and keywords when no model scores (reference §3.2.4).

Used by the engine CLI/simulation and by the scoring fallback (``scoring.fallback``,
``compat.channelScore = "heuristic"``, Derpyu without the auto-patch): α comes from
this module (the reference's ``engine/importance.js``), keywords from the tokenizer, β is
always 0 ("启发式评分 ... β 固定 0"), and the folder is written ``scored: true``.

The reference lists ``importance.weights`` as "见文件" (see the file) and never prints the
numbers, so :data:`DEFAULT_WEIGHTS` is ours. The idea: α is a recall *priority*
(FAIR-DRI lane θ_H = 0.6), and the reference warns that handing out many high α values
clogs the high lane. So the heuristic starts low and only crosses 0.6 when a text shows
at least two independent signs of lasting value. The signals are the same categories the
recall engine's category classes use (preference / agreement / decision / rule), plus
identity facts about the user, concrete parameters (numbers, versions, ports, dates) and,
weakly, length:

    α = clamp(base + Σ weight[f] · feature[f], importance.min, importance.max)

Each marker feature is 1 when any of its cue words occurs (presence, not count, so a
long chatty text cannot pile up α by repetition); ``numbers`` is min(1, distinct numeric
tokens / 3); ``length`` is min(1, characters / 2000). α is rounded to 4 decimals, like
model-submitted α. With the defaults: small talk ≈ 0.2, one signal ≈ 0.4-0.45, two
signals ≥ 0.6.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from engine.keywords import cjk_bigrams, extract_keywords
from engine.stopwords import stopword_table
from engine.tokenizer import normalize_text

DEFAULT_WEIGHTS: dict[str, float] = {
    "base": 0.2,
    "decision": 0.2,
    "agreement": 0.25,
    "preference": 0.2,
    "rule": 0.2,
    "identity": 0.25,
    "numbers": 0.1,
    "length": 0.05,
}
"""Default ``importance.weights`` (reasoning in the module docstring)."""

LENGTH_SATURATION_CHARS: Final = 2000
NUMBERS_SATURATION: Final = 3

_L = r"(?<![a-z0-9_])"  # Latin cue words must start a word ("agree" not in "disagree")
_MARKERS: Final[dict[str, re.Pattern[str]]] = {
    "decision": re.compile(
        r"决定|确定|定下|定了|敲定|选定|采用|改用|就用|最终|结论|拍板"
        rf"|{_L}(?:decid|decision|settled on|go with|we chose|chosen)"
    ),
    "agreement": re.compile(
        r"约定|说好|承诺|答应|保证|以后都|以后要|下次要|记住|别忘|一言为定"
        rf"|{_L}(?:agree|promise|remember|from now on|deal\b)"
    ),
    "preference": re.compile(
        r"喜欢|喜好|偏好|爱好|口味|讨厌|爱吃|最爱|习惯"
        rf"|{_L}(?:prefer|favou?rite|love|hate|dislike|i like|we like)"
    ),
    "rule": re.compile(
        r"必须|务必|不要|不许|不准|禁止|规则|要求|规定|一律|千万|切记"
        rf"|{_L}(?:must|never|always|required?|forbidden|don't|do not|rule)"
    ),
    "identity": re.compile(
        r"我叫|名字|我是|生日|住在|我家|电话|邮箱|地址|身份"
        rf"|{_L}(?:my name|i am|i'm|birthday|i live|email|phone|address)"
    ),
}
_NUMBER = re.compile(r"(?<![0-9A-Za-z_.])v?[0-9]+(?:[.:/\-][0-9]+)*")


@dataclass(frozen=True, slots=True)
class HeuristicScore:
    """Heuristic result: α in [importance.min, importance.max], β 0, keywords."""

    alpha: float
    beta: float
    keywords: list[str]


def _weight(weights: Mapping[str, float], name: str) -> float:
    """Configured weight, or the default when missing or not a finite number."""
    value = weights.get(name, DEFAULT_WEIGHTS[name])
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return DEFAULT_WEIGHTS[name]
    return float(value)


def features(text: str) -> dict[str, float]:
    """The feature values in [0, 1] the weights multiply (``base`` is always 1)."""
    norm = normalize_text(text).casefold()
    out: dict[str, float] = {"base": 1.0}
    for name, pattern in _MARKERS.items():
        out[name] = 1.0 if pattern.search(norm) is not None else 0.0
    numbers = {m.group(0) for m in _NUMBER.finditer(norm)}
    out["numbers"] = min(1.0, len(numbers) / NUMBERS_SATURATION)
    out["length"] = min(1.0, len(norm) / LENGTH_SATURATION_CHARS)
    return out


def heuristic_alpha(
    text: str, *, weights: Mapping[str, float], alpha_min: float, alpha_max: float
) -> float:
    """α = clamp(Σ weight · feature, alpha_min, alpha_max), rounded to 4 decimals.

    A reversed range (min > max) is treated as the single value ``alpha_max`` rather than
    raising: scoring must degrade, not crash, on a bad config.
    """
    raw = sum(_weight(weights, name) * value for name, value in features(text).items())
    lo, hi = float(alpha_min), float(alpha_max)
    lo = min(lo, hi)
    return round(min(hi, max(lo, raw)), 4)


def _padding_bigrams(kws: list[str]) -> list[str]:
    """Bigram candidates in padding order: every keyword's edge bigrams, then inner ones."""
    edges: list[str] = []
    inner: list[str] = []
    for k in kws:
        bgs = cjk_bigrams(k)
        if bgs:
            edges.append(bgs[0])
            edges.append(bgs[-1])
            inner.extend(bgs[1:-1])
    return edges + inner


def heuristic_keywords(
    text: str, *, keywords_min: int, keywords_max: int, extra_stopwords: Iterable[str] = ()
) -> list[str]:
    """Up to ``keywords_max`` keywords; padded towards ``keywords_min`` when short.

    When the text yields fewer than ``keywords_min`` terms, CJK bigrams of the keywords
    found are added: first the leading and trailing bigram of each keyword (a segment's
    ends were cut at stopwords, so they sit on real word boundaries: 喜欢吃川菜 -> 喜欢,
    川菜), then the inner ones. They occur in the text and work with contains matching. If the
    text simply has no more content words (e.g. "你好"), fewer keywords are returned: the
    heuristic never invents words, and the caller decides what a too-short list means.
    """
    hi = max(0, int(keywords_max))
    lo = min(max(0, int(keywords_min)), hi)
    extra = tuple(extra_stopwords)
    kws = extract_keywords(text, max_keywords=hi, extra_stopwords=extra)
    if len(kws) < lo:
        words = stopword_table(extra).words
        seen = {k.casefold() for k in kws}
        for bg in _padding_bigrams(kws):
            if len(kws) >= lo:
                break
            if bg not in seen and bg not in words:
                seen.add(bg)
                kws.append(bg)
    return kws


def heuristic_score(
    text: str,
    *,
    weights: Mapping[str, float],
    alpha_min: float,
    alpha_max: float,
    keywords_min: int,
    keywords_max: int,
    extra_stopwords: Iterable[str] = (),
) -> HeuristicScore:
    """Heuristic α (4 decimals, clamped), β = 0.0 and keywords for an archived text."""
    extra = tuple(extra_stopwords)
    return HeuristicScore(
        alpha=heuristic_alpha(text, weights=weights, alpha_min=alpha_min, alpha_max=alpha_max),
        beta=0.0,
        keywords=heuristic_keywords(
            text, keywords_min=keywords_min, keywords_max=keywords_max, extra_stopwords=extra
        ),
    )
