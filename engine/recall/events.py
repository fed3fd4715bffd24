"""memory_recall's event constraint (reference §1.12 "回忆期四态", §3.0.6).

The labels come from `event` and `events` together (normalised by the scoring path's
rules; 「空」 and the other placeholders ask for nothing) and are OR-ed. With
`event.mode = constrain` each label is resolved against the session's event index:

* *exact*: the label is a canonical event; the call is restricted to the folders of the
  exact labels, C(Q) ∩ W ∩ E, and the answer says 本次回忆已约束事件：「X」（该事件共 N 条记忆）;
* *similar*: no folder carries it, but existing labels reach `event.similarity.threshold`
  (`engine.scoring.events.similarity`, the one similarity of the codebase): they are
  returned as candidates (at most `maxCandidates`, by score then folder count), never
  merged; no memory is returned (missType `event-ambiguous`);
* *unknown*: no folder carries it and nothing is that similar: no memory is returned
  (missType `event`), with the three ways on. Existing labels that share words with it
  but stay under the threshold are listed as near candidates (the reference's known
  limitation: synonyms such as 日本旅游 / 日本旅行 can score under 0.72, and the model
  should still get to judge them).

Several labels: one exact label is enough to constrain (the others are named in a
warning); otherwise any similar label makes the call ambiguous, else it is unknown. No
label at all is *empty* (no constraint). `event.mode = index` or `off` is *disabled*: no
constraint, and the answer says so. `event.askUserHint` adds the ask-the-user sentence
to the similar state and the third option to the unknown one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.recall.constraint import Constraint
from engine.recall.tag_index import TagIndex
from engine.scoring.events import Candidate, candidates

__all__ = ["NEAR_THRESHOLD", "resolve_events"]

NEAR_THRESHOLD = 1e-9
"""Near candidates share at least one token with the label (score > 0)."""


def _candidate_text(found: Sequence[Candidate]) -> str:
    return texts.RECALL_EVENT_CANDIDATE_SEPARATOR.join(
        texts.RECALL_EVENT_CANDIDATE.format(label=c.existing, n=c.count, score=f"{c.score:.2f}")
        for c in found
    )


def _candidate_values(found: Sequence[Candidate]) -> list[dict[str, Any]]:
    return [{"label": c.existing, "count": c.count, "score": c.score} for c in found]


def _info(status: str, labels: Sequence[str], cfg: MemoryConfig, **more: Any) -> dict[str, Any]:
    sim = cfg.event.similarity
    return {
        "status": status,
        "mode": cfg.event.mode,
        "requested": list(labels),
        "similarity": {"metric": sim.metric, "threshold": sim.threshold},
        **more,
    }


def _record(status: str, labels: Sequence[str]) -> dict[str, Any]:
    return {
        "eventStatus": status,
        "eventLabel": labels[0] if labels else None,
        "eventLabels": list(labels),
    }


def resolve_events(labels: Sequence[str], tags: TagIndex, cfg: MemoryConfig) -> Constraint:
    """The event constraint of one call (module docstring); `labels` are normalised."""
    ec = cfg.event
    if not labels:
        return Constraint("event", record=_record("empty", labels))
    if ec.mode != "constrain":
        shown = texts.RECALL_EVENT_ITEM_SEPARATOR.join(labels)
        note = (
            texts.RECALL_EVENT_OFF
            if ec.mode == "off"
            else texts.RECALL_EVENT_INDEX_ONLY.format(labels=shown)
        )
        counts = tags.counts("event") if ec.mode == "index" else {}
        matched = {label: counts[label] for label in labels if label in counts}
        return Constraint(
            "event",
            warnings=(note,),
            value={"eventInfo": _info("disabled", labels, cfg, matched=matched)},
            record=_record("disabled", labels),
        )
    counts = tags.counts("event")
    sim = ec.similarity
    exact = [label for label in labels if counts.get(label, 0) > 0]
    similar: dict[str, list[Candidate]] = {}
    near: dict[str, list[Candidate]] = {}
    for label in labels:
        if label in exact:
            continue
        found = candidates(
            label,
            counts,
            threshold=sim.threshold,
            metric=sim.metric,
            limit=sim.max_candidates,
        )
        if found:
            similar[label] = found
        else:
            near[label] = candidates(
                label,
                counts,
                threshold=NEAR_THRESHOLD,
                metric=sim.metric,
                limit=sim.max_candidates,
            )
    ask = ec.ask_user_hint
    if exact:
        allowed = tags.union("event", exact)
        items = texts.RECALL_EVENT_ITEM_SEPARATOR.join(
            texts.RECALL_EVENT_ITEM.format(label=label, n=counts[label]) for label in exact
        )
        warnings = []
        for label in labels:
            others = similar.get(label) or near.get(label)
            if label in exact:
                continue
            if others:
                warnings.append(
                    texts.RECALL_EVENT_IGNORED_NEAR.format(
                        label=label, candidates=_candidate_text(others)
                    )
                )
            else:
                warnings.append(texts.RECALL_EVENT_IGNORED.format(label=label))
        shown = texts.RECALL_EVENT_ITEM_SEPARATOR.join(exact)
        return Constraint(
            "event",
            allowed=allowed,
            miss_type="event",
            lines=(texts.RECALL_EVENT_CONSTRAINED.format(items=items),),
            warnings=tuple(warnings),
            value={
                "eventInfo": _info(
                    "exact",
                    labels,
                    cfg,
                    matched={label: counts[label] for label in exact},
                    folders=len(allowed),
                )
            },
            record=_record("exact", labels),
            miss_line=texts.RECALL_TOOL_MISS_EVENT.format(labels=shown),
        )
    lines: list[str] = []
    listed: list[Candidate] = []
    if similar:
        for label, found in similar.items():
            lines.append(
                texts.RECALL_EVENT_AMBIGUOUS.format(label=label, candidates=_candidate_text(found))
            )
            listed += found
        if ask:
            lines.append(texts.RECALL_EVENT_ASK_USER)
        status, stop = "similar", "event-ambiguous"
    else:
        status, stop = "unknown", "event"
    for label in labels:
        if label in similar:
            continue
        unknown = texts.RECALL_EVENT_UNKNOWN.format(
            label=label, ask=texts.RECALL_EVENT_UNKNOWN_ASK if ask else ""
        )
        lines.append(unknown)
        if near.get(label):
            lines.append(
                texts.RECALL_EVENT_NEAR.format(
                    threshold=sim.threshold, candidates=_candidate_text(near[label])
                )
            )
            listed += near[label]
    return Constraint(
        "event",
        allowed=frozenset(),
        miss_type=stop,
        stop=stop,
        lines=tuple(lines),
        value={
            "eventInfo": _info(
                status, labels, cfg, candidates=_candidate_values(list(dict.fromkeys(listed)))
            )
        },
        record=_record(status, labels),
    )
