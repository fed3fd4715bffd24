"""The heuristic scoring fallback and pending backpressure (reference §3.0.4, §3.2.4).

:func:`decide` is the whole policy; the handler gathers its inputs and writes the
scores. Heuristic folders are ``scored:true``, ``scoreMode:"heuristic"``, β 0, α from
:mod:`engine.heuristic`, keywords the folder's distinctive words.

* ``compat.channelScore = "heuristic"`` in a QQ channel session: every listed pending
  folder is scored heuristically (§3.2.4), whatever ``scoring.fallback`` says.
* ``always``: every listed pending folder, every time.
* ``never``: no heuristic scoring; archiving pauses while more than
  ``scoring.maxPending`` folders wait ("宁可保留上下文也不产生无法回忆的记忆").
* ``onPressure`` (default), in this order:
  - the model left the pending list undigested for ``autoHeuristicAfterRounds`` user
    turns (plain 4 / channel 2): all of it;
  - the caller archives under context pressure (an emergency pass): all of it, since the
    task block itself costs window;
  - more than ``maxPending`` wait: the oldest ones above ``maxPending``, so the newest
    ones stay for the model and the backlog stays bounded.

"Listed" means the eras the task block shows (``scoring.includeLegacy``): legacy and
synthetic leftovers are marked, never back-filled (§1.11).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from engine.config.model import MemoryConfig
from engine.heuristic import heuristic_score, with_batch
from engine.relevance.stats import TermStats
from engine.scoring.readable import ReadableText, flat_text, readable_text

PAUSED_WARNING = (
    "scoring backpressure: {pending} pending folders > scoring.maxPending {max_pending} with"
    ' scoring.fallback "never": archiving paused until the model scores them'
)
HEURISTIC_WARNING = "heuristic scoring ({reason}): {count} pending folders scored without the model"


@dataclass(frozen=True, slots=True)
class FallbackDecision:
    """Whether archiving may go on, and which folders to score heuristically now."""

    allow_archive: bool
    heuristic_ids: tuple[str, ...] = ()
    reason: str = ""
    warnings: tuple[str, ...] = ()


def decide(
    *,
    fallback: str,
    pending_oldest_first: Sequence[str],
    max_pending: int,
    under_pressure: bool,
    rounds_unjudged: int,
    rounds_limit: int,
    channel_heuristic: bool,
) -> FallbackDecision:
    """The policy described in the module docstring. ``pending_oldest_first`` is only
    measured and sliced (a live ordered view of the index is fine: nothing is copied
    unless it is to be scored)."""
    pending = pending_oldest_first
    count = len(pending)

    def heuristic(ids: Sequence[str], reason: str) -> FallbackDecision:
        if not ids:
            return FallbackDecision(True)
        warning = HEURISTIC_WARNING.format(reason=reason, count=len(ids))
        return FallbackDecision(True, tuple(ids), reason, (warning,))

    if channel_heuristic:
        return heuristic(pending, "channelScore")
    if fallback == "always":
        return heuristic(pending, "always")
    if fallback == "never":
        if count > max_pending:
            warning = PAUSED_WARNING.format(pending=count, max_pending=max_pending)
            return FallbackDecision(False, (), "paused", (warning,))
        return FallbackDecision(True)
    if rounds_limit > 0 and rounds_unjudged >= rounds_limit and pending:
        return heuristic(pending, "rounds")
    if under_pressure and pending:
        return heuristic(pending, "pressure")
    if count > max_pending:
        return heuristic(pending[: count - max_pending], "maxPending")
    return FallbackDecision(True)


_ROLE_PREFIX = re.compile(r"^(?:user|assistant): ", re.MULTILINE)


def heuristic_source(
    readable: ReadableText, messages: Callable[[], Sequence[Mapping[str, Any]]]
) -> str:
    """What heuristic scoring reads: the readable conversation without its ``user:`` /
    ``assistant:`` line tags (they are not keywords), else every text of the folder."""
    if readable.has_conversation:
        return _ROLE_PREFIX.sub("", readable.text)
    return flat_text(messages())


def heuristic_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """:func:`heuristic_source` of archived messages at hand."""
    return heuristic_source(readable_text(messages), lambda: messages)


class _Archived(Protocol):
    @property
    def messages(self) -> Sequence[Mapping[str, Any]]: ...


A = TypeVar("A", bound=_Archived)


def batch_scorer(
    folders: Sequence[A], cfg: MemoryConfig, now_ms: int, base: TermStats | None
) -> Callable[[A], Mapping[str, Any]]:
    """Heuristic scores at creation for one batch of folders being archived: α and
    keywords judged against ``base`` (the session's folders, when known) plus this batch
    (``engine.heuristic.with_batch``), each folder's text read once."""
    texts = {id(f): heuristic_text(f.messages) for f in folders}
    stats = with_batch(base, texts.values(), cfg.keywords.extra_stopwords)

    def score(folder: A) -> Mapping[str, Any]:
        text = texts.get(id(folder))
        return heuristic_fields(
            text if text is not None else heuristic_text(folder.messages), cfg, now_ms, stats
        )

    return score


def heuristic_fields(
    text: str, cfg: MemoryConfig, now_ms: int, stats: TermStats | None = None
) -> dict[str, Any]:
    """The meta fields of a heuristically scored folder: ``scored:true``, β 0, heuristic α
    and keywords, every source ``heuristic``, ``judgedAt`` ``now_ms``.

    ``stats``: document frequencies of the session's folders (``engine.heuristic.with_batch``
    over the texts scored together), so keywords are what sets this folder apart."""
    score = heuristic_score(
        text,
        weights=cfg.importance.weights,
        alpha_min=cfg.importance.min,
        alpha_max=cfg.importance.max,
        keywords_min=cfg.keywords.min,
        keywords_max=cfg.keywords.max,
        extra_stopwords=cfg.keywords.extra_stopwords,
        stats=stats,
    )
    return {
        "alpha": score.alpha,
        "beta": 0.0,
        "keywords": score.keywords,
        "scored": True,
        "rescorePending": False,
        "alphaSource": "heuristic",
        "betaSource": "heuristic",
        "keywordsSource": "heuristic",
        "scoreMode": "heuristic",
        "judgedAt": now_ms,
    }
