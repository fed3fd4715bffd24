"""Location and person filters (reference §1.13.2, §1.14.4, §3.0.3).

Hard filters, never soft boosts: OR within a kind (several names of one person are one
person: `persons: ["周岑", "小周", "岑哥"]`), AND across kinds and with everything else
(keywords, time, event). Each kind has its mode: `constrain` filters, `index` only
records which labels matched (the answer says the filter is not enabled), `off` ignores
the parameter (the answer says so).

memory_recall (`resolve_tags`), resolveTagQuery's five states:

* *empty*: no label given (after normalisation);
* *exact*: every label of the enforced kinds is known;
* *partial*: some are unknown, but every enforced kind has a known one;
* *unknown*: every label of some enforced kind is unknown: that kind allows nothing, so
  the call finds nothing (missType `tag`, not a strike);
* *disabled*: labels were given, but no kind enforces them.

`tagInfo` = {status, requested, matched, unknown, enforced}.

Automatic recall (`mention_filter`): the known labels a user message names
(`engine.recall.tag_index.TagIndex.mentions`: longest first, counted once, at most
`recall.tagMentions.maxTagsPerKind` per kind) filter the round, for each kind whose
mode is `constrain` and whose `autoMention` is on, while `recall.tagMentions.enabled`;
in `index` mode they are only recorded. The same tagInfo, with `source: "mention"`,
goes to the round's telemetry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.recall.constraint import Constraint
from engine.recall.tag_index import TagIndex

__all__ = ["TAG_KINDS", "TAG_PARAMS", "mention_filter", "resolve_tags"]

TAG_KINDS = ("location", "person")
TAG_PARAMS = {"location": "locations", "person": "persons"}
"""The memory_recall parameter (and tagInfo key) of each kind."""


def _mode(cfg: MemoryConfig, kind: str) -> str:
    return str((cfg.location if kind == "location" else cfg.person).mode)


def _join(labels: Sequence[str]) -> str:
    return texts.RECALL_TAG_LABEL_SEPARATOR.join(labels)


def _intersect(sets: Sequence[frozenset[str]]) -> frozenset[str] | None:
    if not sets:
        return None
    out = sets[0]
    for s in sets[1:]:
        out &= s
    return out


def resolve_tags(
    requested: Mapping[str, Sequence[str]], tags: TagIndex, cfg: MemoryConfig
) -> Constraint:
    """The location / person constraint of one call; `requested`: normalised labels by
    kind ("location", "person")."""
    given = {k: list(requested.get(k) or ()) for k in TAG_KINDS}
    info: dict[str, Any] = {
        "status": "empty",
        "requested": {TAG_PARAMS[k]: given[k] for k in TAG_KINDS if given[k]},
        "matched": {},
        "unknown": {},
        "enforced": [],
    }
    if not any(given.values()):
        return Constraint("tag", value={"tagInfo": info}, record={"tagInfo": info})
    warnings: list[str] = []
    sets: list[frozenset[str]] = []
    items: list[str] = []
    emptied = False
    partial = False
    for kind in TAG_KINDS:
        labels = given[kind]
        if not labels:
            continue
        name = texts.RECALL_TAG_KIND_NAMES[kind]
        mode = _mode(cfg, kind)
        param = TAG_PARAMS[kind]
        if mode == "off":
            warnings.append(
                texts.RECALL_TAG_OFF.format(kind=name, mode_key=f"{kind}.mode", param=param)
            )
            continue
        counts = tags.counts(kind)
        matched = [label for label in labels if counts.get(label, 0) > 0]
        unknown = [label for label in labels if label not in matched]
        info["matched"][param] = matched
        info["unknown"][param] = unknown
        folders = tags.union(kind, matched)
        if mode != "constrain":
            warnings.append(
                texts.RECALL_TAG_INDEX_ONLY.format(
                    kind=name, mode_key=f"{kind}.mode", labels=_join(labels), n=len(folders)
                )
            )
            continue
        info["enforced"].append(kind)
        sets.append(folders)
        if matched:
            items.append(
                texts.RECALL_TAG_FILTER_ITEM.format(
                    kind=name, labels=_join(matched), n=len(folders)
                )
            )
        if unknown:
            template = texts.RECALL_TAG_UNKNOWN_PARTIAL if matched else texts.RECALL_TAG_UNKNOWN_ALL
            warning = template.format(kind=name, labels=_join(unknown))
            if kind == "person":
                warning += texts.RECALL_TAG_PERSON_ALIAS
            warnings.append(warning)
            partial = True
            emptied = emptied or not matched
    if not info["enforced"]:
        info["status"] = "disabled"
    else:
        info["status"] = "unknown" if emptied else "partial" if partial else "exact"
    lines = (
        (texts.RECALL_TAG_FILTER.format(items=texts.RECALL_TAG_FILTER_SEPARATOR.join(items)),)
        if items
        else ()
    )
    return Constraint(
        "tag",
        allowed=_intersect(sets),
        miss_type="tag",
        miss_line=texts.RECALL_TOOL_MISS_TAG,
        lines=lines,
        warnings=tuple(warnings),
        value={"tagInfo": info},
        record={"tagInfo": info},
    )


def mention_filter(
    text: str, tags: TagIndex, cfg: MemoryConfig
) -> tuple[frozenset[str] | None, dict[str, Any] | None]:
    """Automatic recall's tag filter for a user message (module docstring): the folders
    it allows (None: no filter) and its tagInfo (None: nothing mentioned or looked for)."""
    if not cfg.recall.tag_mentions.enabled:
        return None, None
    kinds = [
        k
        for k in TAG_KINDS
        if _mode(cfg, k) != "off" and (cfg.location if k == "location" else cfg.person).auto_mention
    ]
    if not kinds:
        return None, None
    found = tags.mentions(text, kinds, cfg.recall.tag_mentions.max_tags_per_kind)
    if not found:
        return None, None
    by_kind: dict[str, list[str]] = {}
    for m in found:
        by_kind.setdefault(m.kind, []).append(m.label)
    enforced = [k for k in TAG_KINDS if k in by_kind and _mode(cfg, k) == "constrain"]
    sets = [tags.union(k, by_kind[k]) for k in enforced]
    allowed = _intersect(sets)
    info = {
        "source": "mention",
        "status": "exact" if enforced else "disabled",
        "requested": {TAG_PARAMS[k]: v for k, v in by_kind.items()},
        "matched": {TAG_PARAMS[k]: v for k, v in by_kind.items()},
        "unknown": {},
        "enforced": enforced,
        "allowed": len(allowed) if allowed is not None else None,
    }
    return allowed, info
