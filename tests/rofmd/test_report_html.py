"""`rofmd report` and its HTML page: the figures, a self-contained page, and a page that
renders in headless Chromium (a screenshot test)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.store import read_jsonl
from engine.store.layout import session_dir_paths
from engine.store.readonly import read_store
from rofmd.cli.main import main
from rofmd.cli.report_html import choose_bucket, render_page
from rofmd.cli.report_svg import PALETTE
from rofmd.cli.stats_report import build_report, timeline

WINDOW = (1240, 1400)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory root with the telemetry of a real archive / judge / recall loop."""
    root = tmp_path_factory.mktemp("report") / "mem"
    assert main(["simulate", "--keep", str(root), "--json"]) == 0
    return root


def _records(root: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(root / "sessions" / "simulate" / "stats.jsonl"))


def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in [k for k in os.environ if k.startswith("ROFMD_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def test_the_timeline_counts_what_the_report_counts(simulated: Path) -> None:
    records = _records(simulated)
    rep = build_report(records)
    rows = timeline(records, 60_000)
    assert rows and all(b["start"] - a["start"] == 60_000 for a, b in pairwise(rows))
    assert sum(r["archives"] for r in rows) == rep["compress"]["count"] > 0
    assert sum(r["folders"] for r in rows) == rep["compress"]["folders"] > 0
    assert sum(r["recallRounds"] for r in rows) == rep["recall"]["rounds"] > 0
    assert sum(r["recalled"] for r in rows) == rep["recall"]["recalled"] > 0
    rollback = {"type": "compress-applied", "time": rows[0]["start"], "rollback": True}
    assert timeline([*records, rollback], 60_000) == rows  # not an archive, as in the report


def test_the_bucket_keeps_the_time_charts_readable() -> None:
    assert choose_bucket(0, 10 * 60_000) == ("minute", 60_000)
    assert (
        choose_bucket(0, 3 * 86_400_000)[0] == "hour"
        or choose_bucket(0, 3 * 86_400_000)[0] == "6 hours"
    )
    name, size = choose_bucket(0, 400 * 86_400_000)
    assert 400 * 86_400_000 // size < 48 and "week" in name


def _page(root: Path, session: str = "simulate") -> str:
    store = read_store(session_dir_paths(root, "simulate"), session)
    records = list(read_jsonl(store.paths.stats))
    return render_page([store], records, build_report(records), root=root, generated_ms=0)


def test_the_page_is_self_contained_and_escapes_what_it_shows(simulated: Path) -> None:
    page = _page(simulated, session='<script>alert("x")</script>')
    assert page.count("<svg") == 6
    assert "<script" not in page and 'alert("x")' not in page
    assert "&lt;script&gt;" in page
    for fetch in ("src=", "href=", "url(", "@import", "https://"):
        assert fetch not in page, fetch
    # the only URL is the SVG namespace, which names and fetches nothing
    assert page.count("http://") == page.count('xmlns="http://www.w3.org/2000/svg"')


def test_report_prints_text_json_and_writes_the_page(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _env(monkeypatch, tmp_path)
    before = {p: p.stat().st_mtime_ns for p in simulated.rglob("*")}
    assert main(["report", "--memory-dir", str(simulated), "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["compress"] == build_report(_records(simulated))["compress"]
    assert doc["eras"]["folders"] == doc["compress"]["folders"]
    assert main(["report", "--memory-dir", str(simulated)]) == 0
    assert "recall rounds" in capsys.readouterr().out
    out = tmp_path / "r.html"
    assert main(["report", "--memory-dir", str(simulated), "--html", str(out), "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["html"] == str(out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)
    assert {p: p.stat().st_mtime_ns for p in simulated.rglob("*")} == before  # read-only
    assert main(["report", "--memory-dir", str(simulated), "--html", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rofmd report: ") and err.count("\n") == 1


# ---- the screenshot ------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_pixels(data: bytes) -> Iterator[tuple[int, ...]]:
    """The pixels of an 8-bit RGB / RGBA non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        flt, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = prev[i], prev[i - channels] if i >= channels else 0
            if flt == 1:
                line[i] = (line[i] + left) & 0xFF
            elif flt == 2:
                line[i] = (line[i] + up) & 0xFF
            elif flt == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif flt == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        for x in range(0, stride, channels):
            yield tuple(line[x : x + 3])
        prev = line


def test_the_html_report_renders_in_headless_chromium(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not found: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium not found: install it (apt-get install chromium) to render the page")
    _env(monkeypatch, tmp_path)
    page = tmp_path / "report.html"
    assert main(["report", "--memory-dir", str(simulated), "--html", str(page)]) == 0
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=0.5",  # the whole page, a quarter of the pixels
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=90,
    )
    assert done.returncode == 0 and shot.exists(), done.stderr.decode()[-2000:]
    colours = Counter(_png_pixels(shot.read_bytes()))
    assert len(colours) > 200, len(colours)  # text, bars, lines: far from a blank page
    white = colours[(255, 255, 255)]
    assert white < sum(colours.values()) * 0.95
    drawn = {c for c in PALETTE[:4] if colours[_rgb(c)] > 100}  # bars and lines, in colour
    assert len(drawn) >= 3, drawn


def _rgb(hex_colour: str) -> tuple[int, ...]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
