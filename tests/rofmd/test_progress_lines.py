"""Progress off a terminal: plain lines only when asked (a script's `rofmd replay`), one
at the end; a terminal gets the redrawn bar instead."""

from __future__ import annotations

import io

from rofmd.cli.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_asked_and_a_last_one_at_close() -> None:
    out = io.StringIO()
    p = Progress(out, 4, "replay", unit="events", plain_interval=0.0)
    for done in range(1, 5):
        p.update(done, f"{done // 2} archives")
    p.close()
    p.close()  # idempotent: no second final line
    lines = out.getvalue().splitlines()
    assert lines[0] == "replay: 25.0% 1 / 4 events, 0 archives"
    assert lines[-1] == "replay: 100.0% 4 / 4 events, 2 archives"
    assert len(lines) == 5 and "\r" not in out.getvalue()


def test_no_plain_lines_unless_asked_and_a_bar_on_a_terminal() -> None:
    quiet = io.StringIO()
    p = Progress(quiet, 4, "backup", unit="folders")
    p.update(2)
    p.close()
    assert quiet.getvalue() == ""
    tty = _Tty()
    bar = Progress(tty, 4, "replay", unit="events", plain_interval=0.0)
    bar.update(4)
    bar.close()
    assert tty.getvalue().startswith("\rreplay [") and tty.getvalue().endswith("4 / 4 events\n")
