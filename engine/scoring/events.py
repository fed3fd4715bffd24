"""Event labels at scoring time (reference §1.12, v1.5.0 merge approval).

Similarity is token Dice, not semantics: a label's tokens are the character bigrams of
each CJK run (a one-character run counts as itself) and the lower-cased Latin / digit
words. ``dice`` = 2|A∩B| / (|A|+|B|); the alternative metrics ``avg`` and ``min`` take the
mean / minimum of the two containment ratios |A∩B|/|A| and |A∩B|/|B|. A pair is "highly
similar" when the score reaches ``event.similarity.threshold`` (0.72) and the labels
differ. 日本旅行 vs 日本 旅行 scores 0.8; 旅行经历 vs 日本旅行 0.33.

With ``event.mergeRequiresApproval`` (default) a similar-but-different label is kept and
returned with its candidates; re-submitting an existing label is the approval. Without
it (the 1.4.x rollback) the label is replaced silently by the best candidate.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from engine.tokenizer import CJK_CLASS

_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_LATIN = re.compile(r"[0-9a-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]+")
SIMILARITY_DIGITS: Final = 2


def label_tokens(label: str) -> frozenset[str]:
    """Bigrams of CJK runs plus Latin / digit words."""
    out: set[str] = set()
    for m in _CJK_RUN.finditer(label):
        run = m.group(0)
        if len(run) == 1:
            out.add(run)
        else:
            out.update(run[i : i + 2] for i in range(len(run) - 1))
    rest = _CJK_RUN.sub(" ", label.lower())
    out.update(_LATIN.findall(rest))
    return frozenset(out)


def similarity(a: str, b: str, metric: str = "dice") -> float:
    """Similarity of two normalised labels in [0, 1]."""
    if a == b:
        return 1.0
    ta, tb = label_tokens(a), label_tokens(b)
    if not ta or not tb:
        return 0.0
    common = len(ta & tb)
    if metric == "avg":
        return (common / len(ta) + common / len(tb)) / 2
    if metric == "min":
        return min(common / len(ta), common / len(tb))
    return 2 * common / (len(ta) + len(tb))


@dataclass(frozen=True, slots=True)
class Candidate:
    """An existing label similar to a submitted one."""

    existing: str
    score: float
    count: int


def candidates(
    label: str,
    existing: Mapping[str, int],
    *,
    threshold: float,
    metric: str,
    limit: int,
) -> list[Candidate]:
    """Existing labels similar to ``label`` (not equal), best first, at most ``limit``.

    Order: score descending, then folder count descending, then label.
    """
    found: list[Candidate] = []
    for other, count in existing.items():
        if other == label or count <= 0:
            continue
        score = similarity(label, other, metric)
        if score >= threshold:
            found.append(Candidate(other, round(score, SIMILARITY_DIGITS), count))
    found.sort(key=lambda c: (-c.score, -c.count, c.existing))
    return found[: max(0, limit)]


def folder_events(events: Iterable[str] | None, event: str | None) -> list[str]:
    """The labels a folder carries: ``events``, else the legacy single ``event``."""
    if events:
        return [e for e in events if isinstance(e, str) and e]
    if isinstance(event, str) and event:
        return [event]
    return []


def folder_labels(events: Iterable[str] | None, event: str | None) -> list[str]:
    """The labels a folder counts for, each once."""
    return list(dict.fromkeys(folder_events(events, event)))


def label_counts(folders: Iterable[tuple[Iterable[str] | None, str | None]]) -> Counter[str]:
    """How many folders carry each label."""
    counts: Counter[str] = Counter()
    for events, event in folders:
        counts.update(folder_labels(events, event))
    return counts


def existing_label_list(counts: Mapping[str, int], limit: int) -> list[tuple[str, int]]:
    """The task block's label list: by count descending, then label; at most ``limit``."""
    items = [(label, n) for label, n in counts.items() if n > 0]
    items.sort(key=lambda item: (-item[1], item[0]))
    return items[: max(0, limit)]
