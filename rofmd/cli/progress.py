"""A one-line progress bar on a terminal, and nothing anywhere else.

Long reads (a first catch-up of a big session log, `rofmd repair-session-log` over a
large file) and long copies (`rofmd backup`, `rofmd restore`, counted in folders or in
bytes) tell a person at a terminal how far they are. Output that is not a terminal
(a log file, a pipe, systemd's journal) gets no bar: escape codes and carriage returns
would only be noise there. A command run by a script may ask for plain lines instead
(``plain_interval``: one line every so many seconds, and one at the end), so a long
`rofmd replay` in CI is not silent for a minute.
"""

from __future__ import annotations

import time
from typing import TextIO

__all__ = ["Progress"]

WIDTH = 30
REDRAW_S = 0.1


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


class Progress:
    """``update(done)`` redraws at most every ``REDRAW_S``; ``close()`` ends the line.

    ``unit``: ``None`` counts bytes (shown in MiB), else the noun of what is counted
    (``"folders"``: ``12 / 340 folders``)."""

    def __init__(
        self,
        stream: TextIO,
        total: int,
        label: str,
        unit: str | None = None,
        *,
        plain_interval: float | None = None,
    ) -> None:
        self._stream = stream
        self.total = max(1, total)
        self.label = label
        self.unit = unit
        self.enabled = bool(getattr(stream, "isatty", lambda: False)())
        self.plain_interval = None if self.enabled else plain_interval
        self._drawn = time.monotonic() if self.plain_interval is not None else 0.0
        self._done = 0
        self.note = ""
        """Shown after the count (what the work found so far: "3 archives")."""

    def update(self, done: int, note: str | None = None) -> None:
        self._done = done
        if note is not None:
            self.note = note
        now = time.monotonic()
        if self.enabled and now - self._drawn >= REDRAW_S:
            self._drawn = now
            self._draw()
        elif self.plain_interval is not None and now - self._drawn >= self.plain_interval:
            self._drawn = now
            self._line()

    def _amount(self) -> str:
        share = min(1.0, self._done / self.total)
        if self.unit is None:
            amount = f"{_mib(self._done)} / {_mib(self.total)}"
        else:
            amount = f"{self._done} / {self.total} {self.unit}"
        return f"{share * 100:5.1f}% {amount}" + (f", {self.note}" if self.note else "")

    def _draw(self) -> None:
        share = min(1.0, self._done / self.total)
        filled = int(share * WIDTH)
        bar = "#" * filled + "-" * (WIDTH - filled)
        self._stream.write(f"\r{self.label} [{bar}] {self._amount()}")
        self._stream.flush()

    def _line(self) -> None:
        self._stream.write(f"{self.label}: {self._amount().strip()}\n")
        self._stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()
            self.enabled = False
        elif self.plain_interval is not None:
            self._line()
            self.plain_interval = None
