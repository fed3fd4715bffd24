"""memory_judge: validation, clamping, cleaning, tags, warnings and output (reference §1.2).

:func:`plan_judge` turns one call's arguments into a :class:`JudgePlan`: the meta changes
to write (one atomic ``update_metas``), the structured value, the text the model reads
and the ``judge`` telemetry record. It reads folders through callables and never writes,
so the handler decides where the disk work runs and when the write is committed.

Rules (each from §1.2 "行为要点" unless noted):

* ``updates`` must be a non-empty array of at most ``scoring.maxItemsPerJudge`` entries,
  else the whole call is refused (``isError``) and asks for batches.
* Per item, and one item's failure never affects another: a missing id, an id this
  session's store does not hold (unknown, or another session's), a repeated id in the
  batch (the first wins, v1.4.1 D-01), an unreadable folder, a non-number α/β.
* New folders (``scored:false``) need α + β + keywords together; ``keep`` does not
  replace them. Re-reviews (``rescorePending``) and other scored folders change α/β only
  (submitted keywords are ignored with a warning); ``keep:true`` keeps the values and
  clears the re-review mark. An item that changes nothing is rejected.
* α is clamped to ``[importance.min, importance.max]`` and rounded to 4 decimals, β to
  [-10, 10] with 1 decimal; neither is ever written as ``-0``.
* Keywords: NFKC, zero-width removal, whitespace folded, wrapping quotes removed, at most
  64 characters each, de-duplicated case-insensitively; then ``keywords.min..max``
  (3~16) or the item is rejected.
* Category keywords (v1.4.1): see :mod:`engine.scoring.categories`.
* events / event / locations / persons: normalised (:mod:`engine.scoring.labels`),
  de-duplicated, cut to ``*.maxPerFolder``; omitted = unchanged, ``[]`` / 「空」 = cleared.
  Event merge approval: :mod:`engine.scoring.events`; labels written earlier in the batch
  are visible to later items. A tag kind whose ``mode`` is ``off`` is not written.
* Warnings (non-blocking): α above ``importance.warnAbove`` (its own closing line),
  uniform α / β over ≥ 3 items (``scoring.warnUniformAlpha``), keyword repeat rate > 50 %,
  reasons missing on > 90 % of ≥ 3 items, new folders without events, category keywords.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engine import texts
from engine.config import MemoryConfig
from engine.config.limits import BETA_MAX, BETA_MIN
from engine.scoring.budget import safe_slice, to_well_formed
from engine.scoring.categories import CATEGORY_KIND, ensure_category
from engine.scoring.events import candidates, folder_events, similarity
from engine.scoring.labels import normalize_label, normalize_labels
from engine.scoring.task_block import format_alpha
from engine.tokenizer import normalize_text

KEYWORD_MAX_CHARS: Final = 64
REASON_MAX_CHARS: Final = 500
QUALITY_MIN_ITEMS: Final = 3
KEYWORD_REPEAT_LIMIT: Final = 0.5
REASON_MISSING_LIMIT: Final = 0.9
IGNORED_TIME_FIELDS: Final = ("eventTime", "eventStart", "eventEnd", "timeTags", "timeText")
_KEYWORD_SPLIT = re.compile(r"[,，、;；\n]+")
_WS = re.compile(r"\s+")
_QUOTES: Final = "\"'“”‘’「」『』`"


class FolderUnreadable(Exception):
    """The folder is indexed but its meta cannot be read."""


@dataclass(frozen=True, slots=True)
class FolderFacts:
    """What the judge needs to know about one folder (from its meta)."""

    id: str
    scored: bool
    rescore_pending: bool
    events: tuple[str, ...] = ()
    locations: tuple[str, ...] | None = None
    persons: tuple[str, ...] | None = None


@dataclass(slots=True)
class JudgePlan:
    """Outcome of one memory_judge call."""

    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    value: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    is_error: bool = False
    telemetry: dict[str, Any] | None = None

    @property
    def touched(self) -> bool:
        """Something was updated or kept (the task list changed)."""
        return bool(self.value.get("updated") or self.value.get("kept"))


def clamp_alpha(value: float, lo: float, hi: float) -> float:
    """α into [lo, hi], 4 decimals, never -0."""
    lo, hi = float(lo), float(hi)
    lo = min(lo, hi)
    return round(min(hi, max(lo, value)), 4) + 0.0


def clamp_beta(value: float) -> float:
    """β into [-10, 10], 1 decimal, never -0 (normalizeBeta)."""
    return round(min(BETA_MAX, max(BETA_MIN, value)), 1) + 0.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _strip_quotes(text: str) -> str:
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text


def clean_keywords(raw: Any) -> list[str]:
    """Cleaned, de-duplicated keywords in submission order (count not checked)."""
    if isinstance(raw, str):
        items: list[Any] = _KEYWORD_SPLIT.split(raw)
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        text = _WS.sub(" ", normalize_text(str(item))).strip()
        text = safe_slice(_strip_quotes(text), KEYWORD_MAX_CHARS).strip()
        key = text.casefold()
        if text and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def _label_list(raw: Any) -> list[Any] | None:
    """A submitted tag value as a list; None when it is not a list or a string."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple):
        return list(raw)
    return None


@dataclass(slots=True)
class _Batch:
    cfg: MemoryConfig
    now_ms: int
    counts: Counter[str]
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    above: list[str] = field(default_factory=list)
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    event_stats: dict[str, int] = field(
        default_factory=lambda: {"assigned": 0, "merged": 0, "cleared": 0, "candidates": 0}
    )
    tag_stats: dict[str, int] = field(
        default_factory=lambda: {"locations": 0, "persons": 0, "events": 0}
    )
    merge_candidates: list[dict[str, Any]] = field(default_factory=list)
    alphas: list[float] = field(default_factory=list)
    betas: list[float] = field(default_factory=list)
    keyword_lists: list[list[str]] = field(default_factory=list)
    reasons_missing: int = 0
    reasons_total: int = 0
    no_event_ids: list[str] = field(default_factory=list)

    def reject(self, folder_id: str, reason: str) -> None:
        self.rejected.append({"id": folder_id, "reason": reason})


def _events_change(
    batch: _Batch, facts: FolderFacts, item: Mapping[str, Any], change: dict[str, Any]
) -> bool:
    """Apply events / event of one item to ``change``; True when events were submitted."""
    cfg = batch.cfg.event
    has_events = item.get("events") is not None
    has_event = item.get("event") is not None
    if not has_events and not has_event:
        return False
    if cfg.mode == "off":
        batch.warnings.append(
            texts.JUDGE_WARN_TAG_MODE_OFF.format(id=facts.id, field="events", mode_key="event.mode")
        )
        return True
    if has_events and has_event:
        batch.warnings.append(texts.JUDGE_WARN_EVENTS_AND_EVENT.format(id=facts.id))
    raw = _label_list(item["events"] if has_events else item["event"])
    if raw is None:
        return True
    labels = normalize_labels(raw, max_length=cfg.max_label_length)
    if len(labels) > cfg.max_per_folder:
        labels = labels[: cfg.max_per_folder]
        batch.warnings.append(
            texts.JUDGE_WARN_TAGS_TRUNCATED.format(
                id=facts.id, field="events", max=cfg.max_per_folder
            )
        )
    old = list(facts.events)
    existing = Counter(batch.counts)
    existing.subtract(dict.fromkeys(old, 1))
    existing = +existing
    final: list[str] = []
    for label in labels:
        if existing.get(label, 0) > 0:
            approved = any(
                o != label
                and o not in labels
                and similarity(o, label, cfg.similarity.metric) >= cfg.similarity.threshold
                for o in old
            )
            if approved:
                batch.event_stats["merged"] += 1
            chosen = label
        else:
            cands = candidates(
                label,
                existing,
                threshold=cfg.similarity.threshold,
                metric=cfg.similarity.metric,
                limit=cfg.similarity.max_candidates,
            )
            chosen = label
            if cands and cfg.merge_requires_approval:
                batch.event_stats["candidates"] += 1
                for c in cands:
                    batch.merge_candidates.append(
                        {
                            "id": facts.id,
                            "submitted": label,
                            "existing": c.existing,
                            "score": c.score,
                        }
                    )
                best = cands[0]
                batch.warnings.append(
                    texts.JUDGE_WARN_EVENT_CANDIDATE.format(
                        submitted=label, existing=best.existing, score=f"{best.score:.2f}"
                    )
                )
            elif cands:
                chosen = cands[0].existing
                batch.event_stats["merged"] += 1
        if chosen not in final:
            final.append(chosen)
    batch.counts.subtract(dict.fromkeys(old, 1))
    batch.counts.update(dict.fromkeys(final, 1))
    if final:
        change.update(events=final, event=final[0], eventSource="llm", eventAt=batch.now_ms)
        batch.event_stats["assigned"] += 1
        batch.tag_stats["events"] += len(final)
    else:
        if old:
            batch.event_stats["cleared"] += 1
        change.update(events=None, event=None, eventSource=None, eventAt=batch.now_ms)
    return True


def _tag_change(
    batch: _Batch, facts: FolderFacts, item: Mapping[str, Any], name: str, change: dict[str, Any]
) -> None:
    """locations / persons of one item."""
    if item.get(name) is None:
        return
    cfg = batch.cfg.location if name == "locations" else batch.cfg.person
    mode_key = "location.mode" if name == "locations" else "person.mode"
    if cfg.mode == "off":
        batch.warnings.append(
            texts.JUDGE_WARN_TAG_MODE_OFF.format(id=facts.id, field=name, mode_key=mode_key)
        )
        return
    raw = _label_list(item[name])
    if raw is None:
        return
    labels = normalize_labels(raw, max_length=cfg.max_label_length, location=name == "locations")
    if len(labels) > cfg.max_per_folder:
        labels = labels[: cfg.max_per_folder]
        batch.warnings.append(
            texts.JUDGE_WARN_TAGS_TRUNCATED.format(id=facts.id, field=name, max=cfg.max_per_folder)
        )
    change[name] = labels or None
    batch.tag_stats[name] += len(labels)


def _reason(item: Mapping[str, Any]) -> str | None:
    raw = item.get("reason")
    if not isinstance(raw, str):
        return None
    text = " ".join(to_well_formed(raw).split())
    return safe_slice(text, REASON_MAX_CHARS) or None


def _judge_one(
    batch: _Batch,
    item: Mapping[str, Any],
    facts: FolderFacts,
    text_of: Callable[[str], str],
) -> None:
    cfg = batch.cfg
    fid = facts.id
    alpha_raw = item.get("alpha")
    beta_raw = item.get("beta")
    alpha = beta = None
    if alpha_raw is not None:
        alpha = _number(alpha_raw)
        if alpha is None:
            batch.reject(fid, texts.JUDGE_REJECT_NOT_NUMBER.format(field="alpha"))
            return
        alpha = clamp_alpha(alpha, cfg.importance.min, cfg.importance.max)
    if beta_raw is not None:
        beta = _number(beta_raw)
        if beta is None:
            batch.reject(fid, texts.JUDGE_REJECT_NOT_NUMBER.format(field="beta"))
            return
        beta = clamp_beta(beta)
    keep = item.get("keep") is True
    has_keywords = item.get("keywords") is not None
    reason = _reason(item)
    change: dict[str, Any] = {}
    for name in IGNORED_TIME_FIELDS:
        if name in item:
            batch.warnings.append(texts.JUDGE_WARN_EVENT_TIME_IGNORED.format(id=fid, field=name))
    if not facts.scored:
        missing = [
            n
            for n, ok in (
                ("alpha", alpha is not None),
                ("beta", beta is not None),
                ("keywords", has_keywords),
            )
            if not ok
        ]
        if missing:
            batch.reject(fid, texts.JUDGE_REJECT_NEEDS_TRIPLE.format(missing=", ".join(missing)))
            return
        assert alpha is not None and beta is not None
        keywords = clean_keywords(item.get("keywords"))
        kmin, kmax = cfg.keywords.min, cfg.keywords.max
        if not kmin <= len(keywords) <= kmax:
            batch.reject(
                fid, texts.JUDGE_REJECT_KEYWORDS.format(min=kmin, max=kmax, n=len(keywords))
            )
            return
        cat = cfg.scoring.category_keyword
        if cat.enabled and alpha >= cat.alpha_min:
            outcome = ensure_category(keywords, text_of(fid), words=cat.words, max_keywords=kmax)
            a = format_alpha(alpha)
            kind = CATEGORY_KIND.get(outcome.word, outcome.word)
            if outcome.action == "added":
                batch.warnings.append(
                    texts.JUDGE_WARN_CATEGORY_ADDED.format(
                        id=fid, alpha=a, kind=kind, word=outcome.word
                    )
                )
            elif outcome.action == "replaced":
                batch.warnings.append(
                    texts.JUDGE_WARN_CATEGORY_REPLACED.format(
                        id=fid,
                        alpha=a,
                        kind=kind,
                        max=kmax,
                        word=outcome.word,
                        old=outcome.replaced,
                    )
                )
            elif outcome.action == "missing":
                batch.warnings.append(
                    texts.JUDGE_WARN_CATEGORY_MISSING.format(
                        id=fid, alpha=a, words="/".join(cat.words)
                    )
                )
            keywords = outcome.keywords
        change.update(
            alpha=alpha,
            beta=beta,
            keywords=keywords,
            scored=True,
            rescorePending=False,
            alphaSource="llm",
            betaSource="llm",
            keywordsSource="llm",
            scoreMode="model",
            judgedAt=batch.now_ms,
        )
        batch.keyword_lists.append(keywords)
        if not _events_change(batch, facts, item, change):
            batch.no_event_ids.append(fid)
        _tag_change(batch, facts, item, "locations", change)
        _tag_change(batch, facts, item, "persons", change)
    else:
        if has_keywords:
            batch.warnings.append(texts.JUDGE_WARN_KEYWORDS_IGNORED.format(id=fid))
        tag_change: dict[str, Any] = {}
        tags = _events_change(batch, facts, item, tag_change)
        _tag_change(batch, facts, item, "locations", tag_change)
        _tag_change(batch, facts, item, "persons", tag_change)
        tags = tags or bool(tag_change)
        if alpha is not None or beta is not None:
            if alpha is not None:
                change.update(alpha=alpha, alphaSource="llm")
            if beta is not None:
                change.update(beta=beta, betaSource="llm")
            change.update(rescorePending=False, judgedAt=batch.now_ms, scoreMode="model")
        elif keep:
            if facts.rescore_pending:
                change["rescorePending"] = False
        elif not tags:
            batch.reject(fid, texts.JUDGE_REJECT_NOTHING)
            return
        change.update(tag_change)
    if reason is not None and (alpha is not None or beta is not None):
        change["reason"] = reason
    if alpha is not None or beta is not None:
        batch.reasons_total += 1
        if reason is None:
            batch.reasons_missing += 1
    if alpha is not None:
        batch.alphas.append(alpha)
        if alpha > cfg.importance.warn_above:
            batch.above.append(
                texts.JUDGE_WARN_ABOVE.format(
                    alpha=format_alpha(alpha), warn=format_alpha(cfg.importance.warn_above), id=fid
                )
            )
    if beta is not None:
        batch.betas.append(beta)
    if facts.scored and alpha is None and beta is None and keep:
        batch.kept.append(fid)
    else:
        batch.updated.append(fid)
    if change:
        batch.changes[fid] = change


def _updates(arguments: Mapping[str, Any]) -> list[Any] | None:
    raw = arguments.get("updates")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, Mapping):
        raw = [raw]
    return list(raw) if isinstance(raw, list) else None


def _rate(value: float) -> float:
    return round(value, 4)


def _quality(batch: _Batch) -> dict[str, float]:
    """Batch quality warnings and the telemetry ratios."""
    cfg = batch.cfg.scoring
    uniform_alpha = 0.0
    if batch.alphas:
        uniform_alpha = Counter(batch.alphas).most_common(1)[0][1] / len(batch.alphas)
    if cfg.warn_uniform_alpha:
        if len(batch.alphas) >= QUALITY_MIN_ITEMS and len(set(batch.alphas)) == 1:
            batch.warnings.append(
                texts.JUDGE_WARN_UNIFORM_ALPHA.format(
                    n=len(batch.alphas), value=format_alpha(batch.alphas[0])
                )
            )
        if len(batch.betas) >= QUALITY_MIN_ITEMS and len(set(batch.betas)) == 1:
            batch.warnings.append(
                texts.JUDGE_WARN_UNIFORM_BETA.format(
                    n=len(batch.betas), value=f"{batch.betas[0]:+.1f}"
                )
            )
    total = sum(len(k) for k in batch.keyword_lists)
    unique = len({k.casefold() for ks in batch.keyword_lists for k in ks})
    repeat = 1 - unique / total if total else 0.0
    if len(batch.keyword_lists) >= 2 and repeat > KEYWORD_REPEAT_LIMIT:
        batch.warnings.append(texts.JUDGE_WARN_KEYWORD_REPEAT.format(rate=f"{repeat:.0%}"))
    missing = batch.reasons_missing / batch.reasons_total if batch.reasons_total else 0.0
    if batch.reasons_total >= QUALITY_MIN_ITEMS and missing > REASON_MISSING_LIMIT:
        batch.warnings.append(texts.JUDGE_WARN_REASON_MISSING.format(rate=f"{missing:.0%}"))
    if batch.no_event_ids:
        batch.warnings.append(
            texts.JUDGE_WARN_EVENT_MISSING.format(
                n=len(batch.no_event_ids), ids=texts.JUDGE_ID_SEPARATOR.join(batch.no_event_ids)
            )
        )
    return {
        "uniformAlphaRate": _rate(uniform_alpha),
        "keywordRepeatRate": _rate(repeat),
        "reasonMissingRate": _rate(missing),
    }


def render_output(value: Mapping[str, Any], above: Sequence[str] = ()) -> str:
    """The text the model reads (§1.2 "render 后模型看到")."""
    sep = texts.JUDGE_ID_SEPARATOR
    updated, kept, rejected = value["updated"], value["kept"], value["rejected"]
    parts = [
        texts.JUDGE_UPDATED.format(n=len(updated), ids=sep.join(updated))
        if updated
        else texts.JUDGE_UPDATED_NONE,
        texts.JUDGE_KEPT.format(n=len(kept)),
        texts.JUDGE_REJECTED.format(
            n=len(rejected),
            items=sep.join(texts.JUDGE_REJECTED_ITEM.format(**r) for r in rejected),
        )
        if rejected
        else texts.JUDGE_REJECTED_NONE,
    ]
    lines = [texts.JUDGE_PART_SEPARATOR.join(parts) + texts.JUDGE_SUMMARY_END]
    ev, tags = value["eventStats"], value["tagStats"]
    if any(ev.values()) or any(tags.values()):
        lines.append(
            texts.JUDGE_EVENT_SUMMARY.format(**ev) + texts.JUDGE_TAG_SUMMARY.format(**tags)
        )
    lines.extend(value["warnings"])
    lines.extend(above)
    return to_well_formed("\n".join(lines))


def plan_judge(
    arguments: Mapping[str, Any],
    *,
    folder: Callable[[str], FolderFacts | None],
    text_of: Callable[[str], str],
    label_counts: Mapping[str, int],
    cfg: MemoryConfig,
    now_ms: int,
) -> JudgePlan:
    """Validate and plan one memory_judge call (rules in the module docstring).

    ``folder(id)`` returns the folder's facts, None when this session has no such folder,
    or raises :class:`FolderUnreadable`. ``text_of(id)`` is the readable archived text
    (only asked for the category keyword guarantee). ``label_counts`` are the event
    labels of every folder of the session with their folder counts.
    """
    updates = _updates(arguments)
    limit = cfg.scoring.max_items_per_judge
    if not updates:
        return JudgePlan(
            text=texts.JUDGE_ERROR_UPDATES, is_error=True, value={"error": "no updates"}
        )
    if len(updates) > limit:
        return JudgePlan(
            text=texts.JUDGE_ERROR_TOO_MANY.format(max=limit, n=len(updates)),
            is_error=True,
            value={"error": "too many updates", "max": limit, "count": len(updates)},
        )
    batch = _Batch(cfg=cfg, now_ms=now_ms, counts=Counter(label_counts))
    seen: set[str] = set()
    for item in updates:
        if not isinstance(item, Mapping):
            batch.reject("?", texts.JUDGE_REJECT_NOT_OBJECT)
            continue
        raw_id = item.get("id")
        fid = raw_id.strip() if isinstance(raw_id, str) else ""
        if not fid:
            batch.reject("?", texts.JUDGE_REJECT_MISSING_ID)
            continue
        fid = to_well_formed(fid)
        if fid in seen:
            batch.reject(fid, texts.JUDGE_REJECT_DUPLICATE)
            continue
        seen.add(fid)
        try:
            facts = folder(fid)
        except FolderUnreadable:
            batch.reject(fid, texts.JUDGE_REJECT_UNREADABLE)
            continue
        if facts is None:
            batch.reject(fid, texts.JUDGE_REJECT_UNKNOWN)
            continue
        _judge_one(batch, item, facts, text_of)
    ratios = _quality(batch)
    value: dict[str, Any] = {
        "updated": batch.updated,
        "kept": batch.kept,
        "rejected": batch.rejected,
        "warnings": batch.warnings + batch.above,
        "eventStats": batch.event_stats,
        "tagStats": batch.tag_stats,
        "eventMergeCandidates": batch.merge_candidates,
    }
    telemetry = {
        "type": "judge",
        "time": now_ms,
        "batchSize": len(updates),
        "updated": len(batch.updated),
        "kept": len(batch.kept),
        "rejected": len(batch.rejected),
        **ratios,
    }
    view = dict(value, warnings=batch.warnings)
    return JudgePlan(
        changes=batch.changes,
        value=value,
        text=render_output(view, batch.above),
        telemetry=telemetry,
    )


def facts_from_meta(
    folder_id: str,
    *,
    scored: bool,
    rescore_pending: bool,
    events: Sequence[str] | None,
    event: str | None,
    locations: Sequence[str] | None,
    persons: Sequence[str] | None,
) -> FolderFacts:
    """FolderFacts from meta fields (labels as stored)."""
    return FolderFacts(
        id=folder_id,
        scored=scored,
        rescore_pending=rescore_pending,
        events=tuple(folder_events(events, event)),
        locations=tuple(locations) if locations is not None else None,
        persons=tuple(persons) if persons is not None else None,
    )


__all__ = [
    "FolderFacts",
    "FolderUnreadable",
    "JudgePlan",
    "clamp_alpha",
    "clamp_beta",
    "clean_keywords",
    "facts_from_meta",
    "normalize_label",
    "plan_judge",
    "render_output",
]
