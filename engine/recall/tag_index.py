"""In-memory event, location and person indexes of a session (reference §1.12, §1.13).

The folders' labels (`events` / legacy `event`, `locations`, `persons` of each index
entry) are the only truth; this index is derived from them, never written to disk. It
lives inside the session's `CandidateIndex` (`engine.recall.candidates`), which adds and
removes folders here as it applies each store change (archive commit, judge, re-archive,
rollback, removal) in place, so the two always describe the same scored folders.

Every label is normalised again here, with the rules the scoring path applied
(`engine.scoring.labels`; the location 家 rule) and the configured `maxLabelLength`, so a
query label and a stored one meet in the same form. A kind whose mode is `off` is not
indexed at all (§1.12 "event.mode='off'(…不建索引)").

Mentions (§1.13.2 automatic recall): the known labels that occur in a user message,
longest first, an occurrence counted once (a shorter label inside a longer one that
matched does not count); Latin labels only as whole words. The location 家 is
mentioned by its home forms (我家 / 家里 / 在家 / 回家 …), never by a bare 家 (大家, 专家);
X家 also by X的家.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.config import MemoryConfig
from engine.keywords import match_key, match_text
from engine.scoring.events import folder_labels
from engine.scoring.labels import HOME, HOME_FORMS, normalize_labels
from engine.tokenizer import is_latin_word_char

__all__ = ["KINDS", "Mention", "TagIndex", "form_keys", "tag_index_params"]

KINDS: Final = ("event", "location", "person")
"""The label kinds, in the order the answers list them."""

_HOME_MENTIONS: Final = tuple(sorted(HOME_FORMS - {HOME}))

FolderTables = tuple[
    dict[str, tuple[tuple[str, ...], ...]], Iterable[tuple[str, str, Iterable[str]]]
]
"""Each labelled folder's labels per kind, and each label's folders (kind, label, ids)."""


def _kind_config(cfg: MemoryConfig, kind: str) -> Any:
    return cfg.event if kind == "event" else cfg.location if kind == "location" else cfg.person


def tag_index_params(cfg: MemoryConfig) -> tuple[Any, ...]:
    """What the index depends on: which kinds are indexed and their label length."""
    return tuple(
        (_kind_config(cfg, k).mode != "off", _kind_config(cfg, k).max_label_length) for k in KINDS
    )


@dataclass(frozen=True, slots=True)
class Mention:
    """A known label found in a message, where."""

    kind: str
    label: str
    start: int


class TagIndex:
    """label -> folder ids, per kind, over the scored folders of one session."""

    def __init__(self, cfg: MemoryConfig) -> None:
        params = tag_index_params(cfg)
        self.enabled: dict[str, bool] = {k: on for k, (on, _) in zip(KINDS, params, strict=True)}
        self._max_len = {k: n for k, (_, n) in zip(KINDS, params, strict=True)}
        self._ids: dict[str, dict[str, set[str]]] = {k: {} for k in KINDS}
        self._of: dict[str, tuple[tuple[str, ...], ...]] = {}
        # how a message names each known label: form (a match key) -> (kind, label)s,
        # and how many forms have each length; kept as labels appear and disappear
        self._forms: dict[str, list[tuple[str, str]]] = {}
        self._form_lens: Counter[int] = Counter()
        # a restore's folder tables, made when first needed (`restore`)
        self._pending: Callable[[], FolderTables] | None = None
        self._settling = threading.Lock()

    # -- building ---------------------------------------------------------------------
    def labels_of_entry(self, entry: Any) -> tuple[tuple[str, ...], ...]:
        """An index entry's labels per kind (in KINDS order), normalised."""
        out: list[tuple[str, ...]] = []
        for kind in KINDS:
            if not self.enabled[kind]:
                out.append(())
                continue
            if kind == "event":
                events, event = getattr(entry, "events", None), getattr(entry, "event", None)
                raw: list[Any] = folder_labels(events, event) if events or event else []
            else:
                raw = list(getattr(entry, kind + "s", None) or ())
            if not raw:
                out.append(())
                continue
            out.append(_normalized(tuple(raw), self._max_len[kind], kind == "location"))
        return tuple(out)

    def add(self, entry: Any) -> None:
        """Index one scored folder (by its index entry)."""
        labels = self.labels_of_entry(entry)
        if not any(labels):
            return
        self._settle()
        fid = str(entry.id)
        if fid in self._of:
            self.remove(fid)
        self._of[fid] = labels
        for kind, kind_labels in zip(KINDS, labels, strict=True):
            table = self._ids[kind]
            for label in kind_labels:
                members = table.get(label)
                if members is None:
                    members = table[label] = set()
                    self._add_forms(kind, label)
                members.add(fid)

    def restore(
        self,
        labels: Iterable[tuple[str, str, Iterable[str]]],
        folders: Callable[[], FolderTables],
    ) -> None:
        """Fill an empty index with what adding its folders in order made (a restore:
        `engine.recall.candidate_snapshot`): each label (kind, label, its form keys:
        `form_keys`) in the order the labels first appeared, and what `folders` makes,
        each labelled folder's labels and each label's folders in order. A message's
        mentions need only the forms; the folder tables are made when first asked for
        (a tag filter that found a label, a change of the index), so a restart's first
        round does not wait for them. `folders` must not fail: the caller checked what
        it reads."""
        forms, lens = self._forms, self._form_lens
        for kind, label, keys in labels:
            for key in keys:
                forms.setdefault(key, []).append((kind, label))
                lens[len(key)] += 1
        self._pending = folders

    def _settle(self) -> None:
        """Make a restore's folder tables, if they are still to be made (readers on other
        threads wait for them, and see them whole)."""
        if self._pending is None:
            return
        with self._settling:
            pending = self._pending
            if pending is None:
                return
            of, tables = pending()
            ids: dict[str, dict[str, set[str]]] = {k: {} for k in KINDS}
            for kind, label, members in tables:
                ids[kind][label] = set(members)
            self._of, self._ids = of, ids
            self._pending = None

    def remove(self, folder_id: str) -> None:
        """Forget one folder (nothing when it carried no label)."""
        self._settle()
        labels = self._of.pop(folder_id, None)
        if labels is None:
            return
        for kind, kind_labels in zip(KINDS, labels, strict=True):
            table = self._ids[kind]
            for label in kind_labels:
                members = table.get(label)
                if members is not None:
                    members.discard(folder_id)
                    if not members:
                        del table[label]
                        self._drop_forms(kind, label)

    def _add_forms(self, kind: str, label: str) -> None:
        for key in form_keys(kind, label):
            self._forms.setdefault(key, []).append((kind, label))
            self._form_lens[len(key)] += 1

    def _drop_forms(self, kind: str, label: str) -> None:
        for key in form_keys(kind, label):
            owners = self._forms[key]
            owners.remove((kind, label))
            if not owners:
                del self._forms[key]
            self._form_lens[len(key)] -= 1
            if not self._form_lens[len(key)]:
                del self._form_lens[len(key)]

    # -- reading ----------------------------------------------------------------------
    def normalize(self, kind: str, values: Iterable[object]) -> list[str]:
        """Query labels of `kind` in the stored form (empty and placeholder ones dropped)."""
        return normalize_labels(values, max_length=self._max_len[kind], location=kind == "location")

    def counts(self, kind: str) -> dict[str, int]:
        """Every label of `kind` and how many folders carry it."""
        self._settle()
        return {label: len(ids) for label, ids in self._ids[kind].items()}

    def folders(self, kind: str, label: str) -> frozenset[str]:
        """The folders carrying `label` (empty when unknown)."""
        self._settle()
        return frozenset(self._ids[kind].get(label, ()))

    def union(self, kind: str, labels: Iterable[str]) -> frozenset[str]:
        """The folders carrying any of `labels` (OR within a kind)."""
        self._settle()
        table = self._ids[kind]
        out: set[str] = set()
        for label in labels:
            out |= table.get(label, set())
        return frozenset(out)

    def labels_by_folder(self) -> Mapping[str, tuple[tuple[str, ...], ...]]:
        """Every labelled folder's labels per kind (for tests and tools)."""
        self._settle()
        return dict(self._of)

    def mentions(self, text: str, kinds: Iterable[str], max_per_kind: int) -> list[Mention]:
        """The known labels of `kinds` that `text` mentions (module docstring), at most
        `max_per_kind` per kind, in the order they occur."""
        wanted = {k for k in kinds if self.enabled.get(k)}
        if not wanted or max_per_kind <= 0 or not text:
            return []
        hay = match_text(text, expand_latin_case=True)
        forms = self._forms
        # every occurrence of a known form: a lookup per (position, form length present)
        hits: list[tuple[int, int, str, str]] = []  # (-length, start, kind, label)
        for size in sorted(self._form_lens, reverse=True):
            for start in range(len(hay) - size + 1):
                owners = forms.get(hay[start : start + size])
                if owners is not None and _whole(hay, start, start + size):
                    hits += [(-size, start, k, label) for k, label in owners if k in wanted]
        # longest first, then leftmost; an occurrence overlapping a taken one does not count
        hits.sort(key=lambda h: (h[0], h[1], KINDS.index(h[2]), h[3]))
        used = [False] * len(hay)
        found: list[Mention] = []
        for neg, start, kind, label in hits:
            end = start - neg
            if any(used[start:end]):
                continue
            used[start:end] = [True] * (end - start)
            found.append(Mention(kind, label, start))
        found.sort(key=lambda m: (m.start, KINDS.index(m.kind)))
        out: list[Mention] = []
        per_kind: dict[str, set[str]] = {}
        for m in found:
            seen = per_kind.setdefault(m.kind, set())
            if m.label in seen or len(seen) >= max_per_kind:
                continue
            seen.add(m.label)
            out.append(m)
        return out


@functools.lru_cache(maxsize=1 << 16)
def _normalized(raw: tuple[Any, ...], max_length: int, location: bool) -> tuple[str, ...]:
    """A folder's stored labels of one kind, normalised (folders share their labels: a
    person or a trip recurs, so the work is done once per distinct list)."""
    return tuple(normalize_labels(raw, max_length=max_length, location=location))


def form_keys(kind: str, label: str) -> list[str]:
    """The match keys of `label`'s forms, each once (how a message names it)."""
    keys = (match_key(form, expand_latin_case=True) for form in _forms(kind, label))
    return list(dict.fromkeys(k for k in keys if k))


def _forms(kind: str, label: str) -> tuple[str, ...]:
    """How a message may name `label`."""
    if kind != "location":
        return (label,)
    if label == HOME:
        return _HOME_MENTIONS
    if label.endswith(HOME) and len(label) > 1:
        return (label, label[:-1] + "的" + HOME)
    return (label,)


def _whole(hay: str, start: int, end: int) -> bool:
    """The occurrence does not glue onto a Latin word on either side."""
    if is_latin_word_char(hay[start]) and start > 0 and is_latin_word_char(hay[start - 1]):
        return False
    return not (
        is_latin_word_char(hay[end - 1]) and end < len(hay) and is_latin_word_char(hay[end])
    )
