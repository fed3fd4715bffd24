"""Era figures of stores (reference §1.11, ``tools/memory-audit.mjs``): pending folders by
era, the measures A/B/C of the reference's table, and the markers ``--apply`` writes.

The rules are :mod:`engine.scoring.eras` (the one implementation); this module only
counts with them, so selfcheck, ``rofmd audit`` and the report show the same figures.
Measure D of the reference ("sessions begun after the v1.3.0 tag, not stress tests")
needs a release boundary of the original plugin that no rule here has: it is left out.

Pure: entries (anything with the index fields) and telemetry records in, figures out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from engine.scoring.eras import (
    ERAS,
    FAKE_BEFORE_PERCENT,
    FAKE_WINDOW_TOKENS,
    LEGACY_BOUNDARY_MS,
    STRESS_FOLDERS,
    STRESS_PENDING,
    Era,
    SessionEraFacts,
    fake_window,
    folder_era,
)

__all__ = [
    "CURRENT_FAIL_SHARE",
    "CURRENT_JUDGED_MIN",
    "CURRENT_WARN_COUNT",
    "CURRENT_WARN_SHARE",
    "EraTotals",
    "StoreEras",
    "boundaries",
    "era_totals",
    "pending_verdict",
    "store_eras",
]

CURRENT_WARN_SHARE = 0.05
CURRENT_WARN_COUNT = 20
CURRENT_FAIL_SHARE = 0.20
CURRENT_JUDGED_MIN = 20
"""selfcheck's pending-era thresholds (§1.11): WARN above 5 % with more than 20 current
pending, FAIL above 20 %, FAIL judged only with at least 20 current folders."""


@dataclass(frozen=True, slots=True)
class StoreEras:
    """One store's folders and pending folders per era."""

    session: str
    folders: int
    pending: int
    fake_window: bool
    synthetic: bool
    """The session rule (fakeWindow and stressBacklog) holds for this store."""
    folders_by_era: dict[str, int]
    pending_by_era: dict[str, list[str]]
    """Era -> ids of its pending folders, in index order."""
    marked: int
    """Pending folders that carry a ``pendingEra`` marker already."""
    unmarked: dict[str, Era] = field(default_factory=dict)
    """Pending folders without a marker -> the era the rules give them (what
    ``rofmd audit --apply`` writes as ``pendingEra``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "folders": self.folders,
            "pending": self.pending,
            "fakeWindow": self.fake_window,
            "synthetic": self.synthetic,
            "foldersByEra": dict(self.folders_by_era),
            "pendingByEra": {era: len(ids) for era, ids in self.pending_by_era.items()},
            "pendingIds": {era: list(ids) for era, ids in self.pending_by_era.items() if ids},
            "marked": self.marked,
            "unmarked": len(self.unmarked),
        }


def _valid_era(value: Any) -> bool:
    return isinstance(value, str) and value in ERAS


def store_eras(
    session: str, entries: Sequence[Any], records: Iterable[Mapping[str, Any]]
) -> StoreEras:
    """The eras of one store's folders (``entries``: its index entries; ``records``: its
    telemetry, read for the fake window)."""
    fake = fake_window(records)
    pending_count = sum(1 for e in entries if e.scored is False)
    synthetic = SessionEraFacts(fake, len(entries), pending_count).synthetic
    folders_by_era = dict.fromkeys(ERAS, 0)
    pending_by_era: dict[str, list[str]] = {era: [] for era in ERAS}
    marked = 0
    unmarked: dict[str, Era] = {}
    for e in entries:
        era = folder_era(
            created_at=int(e.createdAt), pending_era=e.pendingEra, session_synthetic=synthetic
        )
        folders_by_era[era] += 1
        if e.scored is not False:
            continue
        pending_by_era[era].append(e.id)
        if _valid_era(e.pendingEra):
            marked += 1
        else:
            unmarked[e.id] = era
    return StoreEras(
        session,
        len(entries),
        pending_count,
        fake,
        synthetic,
        folders_by_era,
        pending_by_era,
        marked,
        unmarked,
    )


Measure = dict[str, Any]


def _measure(definition: str, num: int, den: int) -> Measure:
    return {
        "definition": definition,
        "pending": num,
        "folders": den,
        "share": round(num / den, 6) if den else None,
    }


@dataclass(frozen=True, slots=True)
class EraTotals:
    """Every store added up, and the reference's measures."""

    stores: int
    folders: int
    pending: int
    folders_by_era: dict[str, int]
    pending_by_era: dict[str, int]
    measures: dict[str, Measure]

    @property
    def current(self) -> Measure:
        return self.measures["C"]

    def to_json(self) -> dict[str, Any]:
        return {
            "stores": self.stores,
            "folders": self.folders,
            "pending": self.pending,
            "foldersByEra": dict(self.folders_by_era),
            "pendingByEra": dict(self.pending_by_era),
            "measures": {k: dict(v) for k, v in self.measures.items()},
        }


def era_totals(stores: Sequence[StoreEras]) -> EraTotals:
    """The sums over ``stores`` and measures A (every folder), B (legacy left out of both
    sides) and C (legacy and synthetic left out: the one bucket with signal)."""
    folders_by_era = dict.fromkeys(ERAS, 0)
    pending_by_era = dict.fromkeys(ERAS, 0)
    for s in stores:
        for era in ERAS:
            folders_by_era[era] += s.folders_by_era[era]
            pending_by_era[era] += len(s.pending_by_era[era])
    folders = sum(folders_by_era.values())
    pending = sum(pending_by_era.values())
    legacy_f, legacy_p = folders_by_era["legacy"], pending_by_era["legacy"]
    measures = {
        "A": _measure("all folders", pending, folders),
        "B": _measure("legacy excluded", pending - legacy_p, folders - legacy_f),
        "C": _measure(
            "current only (legacy and synthetic excluded)",
            pending_by_era["current"],
            folders_by_era["current"],
        ),
    }
    return EraTotals(len(stores), folders, pending, folders_by_era, pending_by_era, measures)


def boundaries() -> dict[str, Any]:
    """The constants the rules use (``--json`` prints them so a table can be re-derived)."""
    return {
        "legacyBoundaryMs": LEGACY_BOUNDARY_MS,
        "legacyBoundary": datetime.fromtimestamp(LEGACY_BOUNDARY_MS / 1000, tz=UTC)
        .isoformat()
        .replace("+00:00", "Z"),
        "fakeWindowTokens": FAKE_WINDOW_TOKENS,
        "fakeBeforePercent": FAKE_BEFORE_PERCENT,
        "stressFolders": STRESS_FOLDERS,
        "stressPending": STRESS_PENDING,
    }


Verdict = Literal["PASS", "WARN", "FAIL"]


def pending_verdict(totals: EraTotals) -> tuple[Verdict, str]:
    """selfcheck's pending-era line: legacy and synthetic pending are information only;
    current pending is judged (thresholds above)."""
    c = totals.current
    num, den = int(c["pending"]), int(c["folders"])
    share = num / den if den else 0.0
    detail = (
        f"INFO: legacy pending {totals.pending_by_era['legacy']} + synthetic pending "
        f"{totals.pending_by_era['synthetic']} (not re-judged); current pending {num}/{den}"
        f" = {share * 100:.2f}% (WARN >5% with >20 pending, FAIL >20%, FAIL judged only with"
        f" >={CURRENT_JUDGED_MIN} current folders)"
    )
    if share > CURRENT_FAIL_SHARE and den >= CURRENT_JUDGED_MIN:
        return "FAIL", detail + "; over the FAIL threshold"
    if share > CURRENT_WARN_SHARE and num > CURRENT_WARN_COUNT:
        return "WARN", detail + "; over the WARN threshold"
    return "PASS", detail + "; within threshold"
