"""Telemetry write failures: warned once per session, kept for `status`.

Reference §1.6 (v1.4.1): a `stats.jsonl` write that fails is no longer silent, yet it
never fails the operation it describes. The first failure of a session is logged as a
warning; later ones only count, so a full disk does not flood the log with one line per
recall. `status` shows the last error and the count (`lastStatsError`,
`statsFailures`), which is where an operator looks when the reports go quiet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog

__all__ = ["StatsHealth"]

log = structlog.get_logger("rofmd.stats")


@dataclass
class StatsHealth:
    """Telemetry failures of every session the daemon opened."""

    failures: int = 0
    last: dict[str, str] | None = None
    _warned: set[str] = field(default_factory=set)

    def failed(self, session_key: str, exc: OSError) -> None:
        """A telemetry record of ``session_key`` could not be written."""
        self.failures += 1
        error = f"{type(exc).__name__}: {exc}"
        self.last = {"session": session_key, "error": error}
        if session_key not in self._warned:
            self._warned.add(session_key)
            log.warning(
                "telemetry write failed; the operation went on (stats.jsonl)",
                session_key=session_key,
                error=error,
            )

    def status(self) -> dict[str, Any]:
        """The `status` fields."""
        return {"lastStatsError": self.last, "statsFailures": self.failures}
