"""Heuristic importance (α) and keywords when no model scores (reference §3.2.4).

Used by the engine CLI/simulation and by the scoring fallback (``scoring.fallback``,
``compat.channelScore = "heuristic"``, Derpyu without the auto-patch): α comes from
this module (the reference's ``engine/importance.js``), keywords from the tokenizer's
surface terms, β is always 0 ("启发式评分 ... β 固定 0"), and the folder is written
``scored: true``.

**α.** The reference lists ``importance.weights`` as "见文件" (see the file) and never
prints the numbers, so :data:`DEFAULT_WEIGHTS` is ours. α is a recall *priority*
(FAIR-DRI lane θ_H = 0.6), and the reference warns that handing out many high α values
clogs the high lane. So the heuristic starts low and only crosses 0.5 when a text shows
at least two independent signs of lasting value. The signals are the categories the
recall engine's category classes use (preference / agreement / decision / rule), plus
identity facts about the user, concrete parameters (numbers, versions, ports, dates,
prices) and, weakly, length:

    α = clamp(base + Σ weight[f] · feature[f], importance.min, importance.max)

The cue patterns are phrases, not single words: "I'm" is not an identity fact ("my name
is", "I live in", "我叫" are), "love it" / "I'd love to" are not preferences ("I love
hiking", "my favourite", "I prefer", "喜欢吃" are), "don't" / "always" alone are not
rules ("must", "from now on", "always use", "必须", "禁止" are). A marker feature is the
*density* of its cue in the text: the number of lines (messages) with a hit, over one
hit per :data:`DENSITY_LINES` lines, capped at 1. A short exchange that states a
decision scores it fully; one incidental "I prefer tea" in a 20-line chat adds a fifth.
``numbers`` counts distinct concrete numbers (two or more digits, or with a separator,
a currency sign or a version ``v``) over max(:data:`NUMBERS_SATURATION`, lines /
:data:`DENSITY_LINES`), damped when the text is data (a log or listing with three or
more numbers on half of its lines); ``length`` is min(1, characters / 2000). α is
rounded to 4 decimals, like model-submitted α. With the defaults: casual chat ≈ 0.15-0.3, one
signal ≈ 0.4, a decision with a port number ≥ 0.5, two marker signals ≥ 0.6.

**Keywords** are a folder's *distinctive* surface words (see :func:`heuristic_keywords`):
ranked by the idf-weighted frequency of the search terms they hold against the session's
other folders (``engine.relevance``: Snowball stems, CJK bigrams, chat filler dropped),
chosen so that every line (message) of the folder is covered before any gets a second
keyword (reference §1.18: every topic gets a keyword), and never a speaker label
("Mina:" at line starts) or a term most folders share.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from engine.keywords import cjk_bigrams, contains_term
from engine.relevance.analyzer import search_terms, stem_word
from engine.relevance.stats import BatchStats, CombinedStats, TermStats
from engine.stopwords import stopword_table
from engine.tokenizer import normalize_text, terms

__all__ = [
    "CUES",
    "DEFAULT_WEIGHTS",
    "DENSITY_LINES",
    "Cues",
    "HeuristicScore",
    "batch_stats",
    "compile_cues",
    "document_terms",
    "features",
    "has_cue",
    "heuristic_alpha",
    "heuristic_keywords",
    "heuristic_score",
    "speaker_labels",
    "with_batch",
]

DEFAULT_WEIGHTS: dict[str, float] = {
    "base": 0.15,
    "decision": 0.25,
    "agreement": 0.25,
    "preference": 0.2,
    "rule": 0.25,
    "identity": 0.25,
    "numbers": 0.25,
    "length": 0.05,
}
"""Default ``importance.weights`` (reasoning in the module docstring)."""

LENGTH_SATURATION_CHARS: Final = 2000
NUMBERS_SATURATION: Final = 2
DENSITY_LINES: Final = 4
"""One cue hit per this many lines saturates a marker feature."""
TABLE_LINES: Final = 3
TABLE_DAMPING: Final = 0.25
"""A text of at least :data:`TABLE_LINES` lines, half of them holding three or more
concrete numbers, is data (a log, a listing): its ``numbers`` feature is damped by this
factor."""

_WORD = "a-z0-9_'’"
"""A Latin cue starts a word: the character before it is none of these ("agree" is no cue
in "disagree", nor "promise" in "compromise")."""
_END = r"(?![a-z0-9_])"
"""... and ends one, unless its marker says otherwise (``latin_end``)."""
_OBJ_NOT_PREF = (
    r"(?!(?:it|that|this|these|those|you|ya|him|her|them|us|your|yours|to|how|what|when"
    r"|where|the idea|hearing|seeing|reading that|being there|the way)\b)"
)


@dataclass(frozen=True, slots=True)
class Cues:
    """The cue phrases of one marker, each a regular expression that starts with a plain
    character: CJK phrases match anywhere, Latin phrases at a word start and, with
    ``latin_end``, at a word end.

    Why phrases in lists rather than one hand-written pattern: the pattern
    :func:`compile_cues` makes of them groups the phrases by their first character, so
    the regex engine skips, at C speed, every position whose character starts no phrase.
    A pattern that opens with a look-behind or a group of alternatives gets no such skip
    and tries every phrase at every character: 20-30 times slower on CJK text, 3 times on
    English, most of an archive's CPU time on long messages."""

    cjk: tuple[str, ...]
    latin: tuple[str, ...]
    latin_end: str = _END


_PLAIN_START = re.compile(r"[^\\\[\](){}.*+?|^$]")


def _grouped(phrases: Iterable[str], guard: Callable[[str], str], end: str) -> list[str]:
    by_first: dict[str, list[str]] = {}
    for phrase in phrases:
        if not _PLAIN_START.match(phrase) or phrase[1:2] in ("*", "+", "?", "{"):
            raise ValueError(f"a cue phrase must start with a plain character: {phrase!r}")
        by_first.setdefault(phrase[0], []).append(phrase[1:])
    return [
        f"{re.escape(first)}{guard(first)}(?:{'|'.join(rests)}){end}"
        for first, rests in by_first.items()
    ]


def compile_cues(*markers: Cues) -> re.Pattern[str]:
    """One pattern matching where any phrase of ``markers`` does (what the plain
    ``cjk|…|(?<![WORD])(?:latin|…)END`` would: whether a text holds a cue, not which),
    shaped for the engine's first-character skip (see :class:`Cues`)."""
    parts: list[str] = []
    for cues in markers:
        parts += _grouped(cues.cjk, lambda _first: "", "")
        # the word-start look-behind after the first character, which it re-reads
        parts += _grouped(
            cues.latin, lambda first: f"(?<![{_WORD}]{re.escape(first)})", cues.latin_end
        )
    return re.compile("|".join(parts))


def _phrases(blob: str) -> tuple[str, ...]:
    """Space-separated phrases (keeps the CJK lists readable)."""
    return tuple(blob.split())


CUES: Final[dict[str, Cues]] = {
    "decision": Cues(
        cjk=(
            *_phrases("决定 定下 定了 敲定 选定 采用 改用 就用 最终方案 最终版 结论 拍板"),
            *_phrases("确定用 确定了"),
        ),
        latin=(
            "decided",
            "decide to",
            "decision",
            "settled on",
            "settle on",
            *(f"{who} go with" for who in ("let's", "we'll", "we will", "i'll", "i will", "we")),
            "we (?:chose|picked)",
            "we(?:'ll| will) (?:choose|pick|use)",
            "chosen",
            "switch(?:ed)? to",
            "finali[sz]ed",
            "the plan is",
        ),
    ),
    "agreement": Cues(
        cjk=_phrases("约定 说好 承诺 答应 保证 以后都 以后要 下次要 记住 别忘 一言为定"),
        latin=(
            "agreed",
            "we agree",
            "let's agree",
            "promise[ds]?",
            "i'll make sure",
            "i will make sure",
            "remember to",
            "remember that",
            "please remember",
            "don't forget",
            "do not forget",
            "from now on",
            "it's a deal",
            r"deal\?",
            "count on me",
            "i owe you",
        ),
    ),
    "preference": Cues(
        cjk=(
            *_phrases("偏好 喜好 口味 讨厌 爱吃 爱喝 最爱 忌口 过敏 不吃(?!了) 不喝(?!了) 习惯用"),
            "我(?:很|最|特别|比较|更|一直|不太|不)?喜欢(?!你)",
        ),
        latin=(
            "i prefer",
            "we prefer",
            "prefer(?:s|red)? (?:to|the|a|it)",
            "my favou?rites?",
            "favou?rite (?:is|was|food|color|colour|book|movie|song|band|place|game)",
            "i'm (?:a big |a huge )?fan of",
            "i'm allergic",
            "allergic to",
            "i'm vegetarian",
            "i'm vegan",
            "i (?:really |absolutely |just |truly )?(?:love|like|enjoy|hate|dislike|can't stand)"
            f" {_OBJ_NOT_PREF}[a-z]",
        ),
        latin_end="",
    ),
    "rule": Cues(
        cjk=_phrases(
            "必须 务必 不许 不准 禁止 规则 规定 一律 千万别 千万不要 切记 以后都 不得 严禁"
        ),
        latin=(
            r"must(?! (?:be|have been|feel|'ve|have had|say)\b)",
            "never ever",
            "from now on",
            "always (?:use|run|keep|put|add|check|ask|call|write|test|deploy|commit|push)",
            "never (?:use|run|push|commit|deploy|delete|share|store|call|put)",
            "do not ever",
            "make sure (?:to|you)",
            "mandatory",
            "is required",
            "are required",
            "forbidden",
            "not allowed",
            "the rule is",
            "our rule",
            "my rule",
            "house rules?",
            "as a rule",
            "rule of thumb",
            "policy is",
        ),
    ),
    "identity": Cues(
        cjk=_phrases(
            "我叫 名字是 名字叫 叫我 我住 住在 我家在 生日 电话号 手机号 邮箱 地址是 我来自 老家 我今年"
        ),
        latin=(
            "my name is",
            "my name's",
            "call me",
            "i live in",
            "i live at",
            "i'm from",
            "i am from",
            "i was born",
            "my birthday",
            "my email",
            "my phone",
            "my number is",
            "my address",
            "i work (?:as|at|for)",
            r"i'm \d+ years old",
            r"i am \d+ years old",
            "my (?:wife|husband|partner|son|daughter)(?:'s name)? is",
        ),
    ),
}
"""The cue phrases of each marker feature (the module docstring says why phrases)."""
_MARKERS: Final[dict[str, re.Pattern[str]]] = {
    name: compile_cues(cues) for name, cues in CUES.items()
}
_NUMBER = re.compile(r"(?<![0-9a-z_.])([$¥€£]\s?)?(v)?([0-9]+(?:[.:/\-,][0-9]+)*)")
_LINES = re.compile(r"\r\n|\r|\n")
_PROTOCOL_PREFIXES: Final = ("[tool-call", "[tool-added", "[tool-removed", "[tool-result")


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


def _lines(text: str) -> list[str]:
    """The non-empty lines (messages) of a text, without tool protocol lines (unless
    there is nothing else)."""
    lines = [line for line in _LINES.split(text) if line.strip()]
    talk = [line for line in lines if not line.lstrip().startswith(_PROTOCOL_PREFIXES)]
    return talk or lines


def _concrete(match: re.Match[str]) -> bool:
    """A number worth remembering: 2+ digits, a separator, a currency sign or ``v``."""
    digits = match.group(3)
    return bool(match.group(1) or match.group(2)) or len(digits) >= 2


@functools.cache
def _any_marker(names: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for several markers: a line is scanned once, not once per marker."""
    return compile_cues(*(CUES[name] for name in names))


def has_cue(text: str, names: tuple[str, ...]) -> bool:
    """Whether a line of ``text`` holds a cue of one of the named markers: what
    ``features(text)[name] > 0`` says for any of them, without computing the rest (and
    stopping at the first hit)."""
    search = _any_marker(names).search
    return any(search(normalize_text(line).casefold()) is not None for line in _lines(text))


def features(text: str) -> dict[str, float]:
    """The feature values in [0, 1] the weights multiply (``base`` is always 1)."""
    lines = [normalize_text(line).casefold() for line in _lines(text)]
    per = max(1.0, len(lines) / DENSITY_LINES)
    out: dict[str, float] = {"base": 1.0}
    for name, pattern in _MARKERS.items():
        hits = sum(1 for line in lines if pattern.search(line) is not None)
        out[name] = min(1.0, hits / per)
    concrete = [[m for m in _NUMBER.finditer(line) if _concrete(m)] for line in lines]
    numbers = {m.group(0).replace(" ", "") for found in concrete for m in found}
    dense = sum(1 for found in concrete if len(found) >= 3)
    data = 1.0
    if len(lines) >= TABLE_LINES and dense * 2 >= len(lines):
        data = TABLE_DAMPING  # a log, a listing, a table: numbers are data, not parameters
    out["numbers"] = data * min(1.0, len(numbers) / max(float(NUMBERS_SATURATION), per))
    out["length"] = min(1.0, sum(len(line) for line in lines) / LENGTH_SATURATION_CHARS)
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


# ---- keywords ------------------------------------------------------------------------


def _word_set(blob: str) -> frozenset[str]:
    """A whitespace-separated word list as a frozenset (keeps the tables readable)."""
    return frozenset(blob.split())


COMMON_DOCS_MIN: Final = 4
"""With at least this many documents in the corpus, a term in more than half of them is
never a keyword (a speaker's name, the project everybody talks about)."""
FLOOR_RATIO: Final = 0.15
"""Candidates scoring below this share of the best one are only used to reach
``keywords.min``: a low-density folder gets few keywords, not padding."""
COVER_RATIO: Final = 0.35
"""A line (message) is given a keyword of its own only if it holds a candidate scoring
at least this share of the best one: small talk lines need no keyword."""
GENERAL_DAMPING: Final = 0.3
"""Score factor of everyday words (:data:`GENERAL_WORDS`): distinctive only when the
corpus says so loudly (a rare "time" in a session of pottery talk still loses). Below
:data:`COVER_RATIO`, so an everyday word never claims a line for itself."""
PARAMETER_BOOST: Final = 1.25
"""Score factor of concrete parameters (a surface of 3+ characters with a digit: 8443,
v1.2.0, 2024): what users come back to ask about."""

GENERAL_WORDS: Final[frozenset[str]] = _word_set(
    """
    time times day days week weeks month months year years hour hours minute minutes morning
    afternoon evening night weekend moment while long short soon later early late sometime
    sometimes often usually finally already almost again ago recently lately make made makes
    making take took takes taking try tried tries trying give gave given find found keep
    kept start started starts starting begin began run ran runs running work worked works
    working need needed needs want wanted wants look looked looks looking feel felt feels
    feeling put puts call called help helped show showed shown use used using ask asked
    bring brought turn turned move moved leave left stay stayed happen happened happens
    change changed finish finished done do doing thought believe wish wished enjoy enjoyed
    enjoying love loved loves like liked likes hate plan plans planned planning hope care
    cares caring bet deserve deserved congrats congratulations idea ideas plan part place
    places point kind sort type bit piece end side case fact reason problem question answer
    news story stories life world people person friend friends family guy guys folks man
    woman kid kids everybody somebody nobody new old big small little large huge tiny high
    low hard easy busy free full open best better worse worst first second last next same
    different own whole sure certain able ready possible important special interesting nice
    beautiful cute crazy weird funny tough poor smart simple quick fast slow top though
    although however anyway anyways instead together especially probably honestly seriously
    literally basically exactly quite rather enough almost pretty picture pictures photo
    photos share shared talk talked talking chat message thanks thank welcome take care
    behind around across along near inside outside without within beyond toward towards upon
    onto
    """
)
"""Everyday English words: not stopwords, but what a question about a memory asks for
is rarely one of them."""

_LABEL = re.compile(
    r"^[ \t]*(?P<label>[^\W\d_][\w'’.\-]*(?:[ \t][\w'’.\-]+){0,2})[ \t]*[:：](?![0-9/])"
)
_NOT_KEYWORDS: Final = frozenset({"tool-call", "tool-added", "tool-removed", "tool-result"})
_PLAIN_WORD = re.compile(r"[a-z\u00e0-\u024f]+")
_GENERAL_STEMS: Final[frozenset[str]] = frozenset(stem_word(w) for w in GENERAL_WORDS)


def document_terms(text: str, extra_stopwords: Iterable[str] = ()) -> list[str]:
    """The terms a text counts as a document for keyword distinctiveness: its search
    terms, plus the folded surface of every tokenizer term the analyser gives nothing
    for but that can be a keyword (``1.1``, ``2.3``, ``C++``), so those are judged
    against the batch too."""
    extra = tuple(extra_stopwords)
    out = search_terms(text, extra)
    table = stopword_table(extra)
    for surface in terms(text, table):
        info = _surface_terms(surface, extra)
        if info is not None and info[2]:
            out.extend(info[1])
    return out


def batch_stats(texts: Iterable[str], extra_stopwords: Iterable[str] = ()) -> BatchStats:
    """Document frequencies of :func:`document_terms` of ``texts`` (one document each)."""
    extra = tuple(extra_stopwords)
    return BatchStats(document_terms(t, extra) for t in texts)


def with_batch(
    base: TermStats | None, texts: Iterable[str], extra_stopwords: Iterable[str] = ()
) -> TermStats:
    """``base`` (the session's other folders, if known) plus a batch of texts."""
    batch = batch_stats(texts, extra_stopwords)
    return batch if base is None else CombinedStats(base, batch)


def speaker_labels(text: str) -> frozenset[str]:
    """Case-folded speaker labels: names before ':' at line starts, when the text is a
    labelled chat (labels used on 2+ lines cover at least half of its lines); then every
    label on any line counts, so the speaker who talked once is a label too."""
    lines = _lines(text)
    found: list[str] = []
    for line in lines:
        m = _LABEL.match(normalize_text(line))
        found.append(m.group("label").casefold() if m is not None else "")
    counts = Counter(lab for lab in found if lab)
    repeated = sum(n for n in counts.values() if n >= 2)
    if not lines or repeated * 2 < len(lines):
        return frozenset()
    return frozenset(counts)


def _idf(stats: TermStats | None, term: str) -> float:
    if stats is None:
        return 1.0
    n = max(0, stats.docs)
    df = min(max(0, stats.df(term)), n)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(slots=True)
class _Candidate:
    key: str
    first: int
    terms: tuple[str, ...]
    surfaces: Counter[str] = field(default_factory=Counter)
    lines: set[int] = field(default_factory=set)
    score: float = 0.0

    @property
    def display(self) -> str:
        """The most frequent surface form, the first seen on ties."""
        best = max(self.surfaces.values())
        return next(s for s, n in self.surfaces.items() if n == best)


@functools.lru_cache(maxsize=1 << 16)
def _surface_terms(
    surface: str, extra: tuple[str, ...]
) -> tuple[str, tuple[str, ...], bool] | None:
    """(merge key, terms, whether the terms are the fallback surface) of one tokenizer
    term, or None when it is not a candidate (chat filler, a stopword the analyser drops,
    a protocol tag, a one- or two-digit number: clock and list noise). Plain words merge
    by stem (finished / finish); anything else (versions, numbers, CJK phrases, C++) by
    its folded form, and when the analyser gives it no term (``1.1``, ``C++``) that form
    is its term."""
    folded = surface.casefold()
    if folded in _NOT_KEYWORDS or (folded.isdigit() and len(folded) <= 2):
        return None
    found = tuple(dict.fromkeys(search_terms(surface, extra)))
    plain = _PLAIN_WORD.fullmatch(folded) is not None
    if not found:
        if plain or any(c >= "\u2e80" for c in folded):
            return None
        return folded, (folded,), True
    if plain and len(found) == 1:
        return "\x00" + found[0], found, False
    return folded, found, False


def _candidates(
    lines: list[str], extra: tuple[str, ...], labels: frozenset[str]
) -> list[_Candidate]:
    table = stopword_table(extra)
    label_terms = {t.casefold() for lab in labels for t in terms(lab, table)}
    by_key: dict[str, _Candidate] = {}
    order = 0
    for i, line in enumerate(lines):
        for surface in terms(line, table):
            if surface.casefold() in label_terms:
                continue
            info = _surface_terms(surface, extra)
            if info is None:
                continue
            key, found, _ = info
            cand = by_key.get(key)
            if cand is None:
                cand = by_key[key] = _Candidate(key, order, found)
            order += 1
            cand.surfaces[surface] += 1
            cand.lines.add(i)
    return list(by_key.values())


def _select(
    cands: list[_Candidate], n_lines: int, hi: int, cover_min: float, floor: float
) -> list[_Candidate]:
    """Coverage first, then rank. While some line (message) holds no keyword yet, the best
    candidate scoring at least ``cover_min`` that occurs on such a line is picked: every
    topic of the folder gets a keyword, best first. The remaining slots go to the other
    candidates scoring at least ``floor``, best first. A candidate contained in a keyword
    already picked is skipped (陶艺 after 陶艺课, node after node.js: no new match)."""
    ranked = sorted(cands, key=lambda c: (-c.score, c.first))
    picked: list[_Candidate] = []
    keys: list[str] = []
    covered = [False] * n_lines

    def take(cand: _Candidate) -> None:
        folded = cand.display.casefold()
        if any(contains_term(k, folded) for k in keys):
            return
        picked.append(cand)
        keys.append(folded)
        for i in cand.lines:
            covered[i] = True

    pending = [c for c in ranked if c.score >= cover_min]
    while len(picked) < hi:
        choice = next((c for c in pending if any(not covered[i] for i in c.lines)), None)
        if choice is None:
            break
        pending.remove(choice)
        take(choice)
    chosen = {id(c) for c in picked}
    for cand in ranked:
        if len(picked) >= hi or cand.score < floor:
            break
        if id(cand) not in chosen:
            take(cand)
    return picked


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
    text: str,
    *,
    keywords_min: int,
    keywords_max: int,
    extra_stopwords: Iterable[str] = (),
    stats: TermStats | None = None,
) -> list[str]:
    """Up to ``keywords_max`` distinctive keywords; padded towards ``keywords_min``.

    Candidates are the tokenizer's surface terms (``engine.tokenizer.terms``: real words
    of the text, for display and contains-matching), plain words merged by stem. Each is
    scored by its best search term t (``engine.relevance.analyzer.search_terms``):
    (1 + ln tf(t)) · idf(t), idf = ln(1 + (N - df + 0.5) / (df + 0.5)) over ``stats``
    (the session's folders; ``None``: idf 1, plain frequency). Never candidates: speaker
    labels (:func:`speaker_labels`), chat filler and stopwords, and, when ``stats`` has
    at least :data:`COMMON_DOCS_MIN` documents, a candidate whose every term is in more
    than half of them. Selection covers every line before any line gets a second
    keyword (best first, ties by first occurrence), skips a word contained in a keyword
    already picked, and leaves out candidates below :data:`FLOOR_RATIO` of the best.

    When fewer than ``keywords_min`` result, the floored candidates come back first, then
    CJK bigrams of the keywords found: the leading and trailing bigram of each keyword (a
    segment's ends were cut at stopwords, so they sit on real word boundaries:
    喜欢吃川菜 -> 喜欢, 川菜), then the inner ones. If the text simply has no more content
    words (e.g. "你好"), fewer keywords are returned: the heuristic never invents words.
    """
    hi = max(0, int(keywords_max))
    lo = min(max(0, int(keywords_min)), hi)
    if hi == 0 or not text:
        return []
    extra = tuple(extra_stopwords)
    lines = _lines(text)
    cands = _candidates(lines, extra, speaker_labels(text))
    tf = Counter(search_terms(text, extra))
    docs = stats.docs if stats is not None else 0
    kept: list[_Candidate] = []
    for cand in cands:
        if (
            stats is not None
            and docs >= COMMON_DOCS_MIN
            and all(stats.df(t) * 2 > docs for t in cand.terms)
        ):
            continue
        cand.score = max(
            (1.0 + math.log(max(1, tf.get(t, 0) or sum(cand.surfaces.values())))) * _idf(stats, t)
            for t in cand.terms
        )
        if cand.key.startswith("\x00") and cand.key[1:] in _GENERAL_STEMS:
            cand.score *= GENERAL_DAMPING
        elif len(cand.key) >= 3 and any(c.isdigit() for c in cand.key):
            cand.score *= PARAMETER_BOOST
        kept.append(cand)
    if not kept:
        return []
    top = max(c.score for c in kept)
    picked = _select(kept, len(lines), hi, top * COVER_RATIO, top * FLOOR_RATIO)
    kws = [c.display for c in picked]
    if len(kws) < lo:
        chosen = {id(c) for c in picked}
        rest = sorted((c for c in kept if id(c) not in chosen), key=lambda c: (-c.score, c.first))
        for cand in rest:
            if len(kws) >= lo:
                break
            if cand.display not in kws:
                kws.append(cand.display)
    if len(kws) < lo:
        words = stopword_table(extra).words
        seen = {k.casefold() for k in kws}
        for bg in _padding_bigrams(kws):
            if len(kws) >= lo:
                break
            if bg not in seen and bg not in words and search_terms(bg, extra):
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
    stats: TermStats | None = None,
) -> HeuristicScore:
    """Heuristic α (4 decimals, clamped), β = 0.0 and keywords for an archived text.

    ``stats``: document frequencies of the session's folders (this one included or not),
    which make keywords distinctive; ``None`` scores the text on its own.
    """
    extra = tuple(extra_stopwords)
    return HeuristicScore(
        alpha=heuristic_alpha(text, weights=weights, alpha_min=alpha_min, alpha_max=alpha_max),
        beta=0.0,
        keywords=heuristic_keywords(
            text,
            keywords_min=keywords_min,
            keywords_max=keywords_max,
            extra_stopwords=extra,
            stats=stats,
        ),
    )
