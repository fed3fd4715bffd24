"""Era buckets of pending folders (reference §1.11): the one implementation of the rules.

Every reader (the task block, backpressure, the heuristic fallback, audits) asks
:func:`folder_era`, so "which pending folders count" has one answer.

* ``legacy``: by folder. A ``pendingEra`` marker wins; otherwise ``createdAt`` before the
  v1.2.0 boundary 2026-10-27T19:14:00Z.
* ``synthetic``: by session. ``fakeWindow and stressBacklog``: fakeWindow = a telemetry
  record with ``windowTokens`` (rofmd's ``compress-applied`` calls it ``contextWindow``)
  below 32000 or ``beforePercent > 500``; stressBacklog = the
  session archived ≥ 100 folders or has ≥ 100 pending. Both are needed: a QQ channel with a
  2000-token window and 10 folders is channel behaviour, a 1M-window session with 359
  folders is a real session.
* ``current``: everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

Era = Literal["legacy", "synthetic", "current"]
ERAS: Final[tuple[str, ...]] = ("legacy", "synthetic", "current")

LEGACY_BOUNDARY_MS: Final = 1_793_128_440_000
"""2026-10-27T19:14:00Z (= 2026-10-28 03:14 +08), the v1.2.0 boundary."""
FAKE_WINDOW_TOKENS: Final = 32_000
FAKE_BEFORE_PERCENT: Final = 500
STRESS_FOLDERS: Final = 100
STRESS_PENDING: Final = 100


@dataclass(frozen=True, slots=True)
class SessionEraFacts:
    """What the session-level rule needs: telemetry and volume."""

    fake_window: bool
    folder_count: int
    pending_count: int

    @property
    def synthetic(self) -> bool:
        """fakeWindow && stressBacklog."""
        stress = self.folder_count >= STRESS_FOLDERS or self.pending_count >= STRESS_PENDING
        return self.fake_window and stress


def is_fake_window_record(record: Mapping[str, Any]) -> bool:
    """One telemetry record shows a fake window (``windowTokens`` / ``beforePercent``)."""
    window = record.get("windowTokens", record.get("contextWindow"))
    before = record.get("beforePercent")
    if (
        isinstance(window, int | float)
        and not isinstance(window, bool)
        and 0 < window < FAKE_WINDOW_TOKENS
    ):
        return True
    return (
        isinstance(before, int | float)
        and not isinstance(before, bool)
        and before > FAKE_BEFORE_PERCENT
    )


def fake_window(records: Iterable[Mapping[str, Any]]) -> bool:
    """Any telemetry record of the session shows a fake window."""
    return any(is_fake_window_record(r) for r in records)


def folder_era(*, created_at: int, pending_era: str | None, session_synthetic: bool) -> Era:
    """The era of one folder: the marker, then the boundary, then the session rule."""
    if pending_era in ERAS:
        return pending_era  # type: ignore[return-value]
    if created_at < LEGACY_BOUNDARY_MS:
        return "legacy"
    if session_synthetic:
        return "synthetic"
    return "current"


def listed(era: Era, *, include_legacy: bool) -> bool:
    """Whether a pending folder of ``era`` enters the task block (``scoring.includeLegacy``)."""
    return include_legacy or era == "current"
