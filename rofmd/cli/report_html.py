"""`rofmd report [--html FILE]`: the §1.6 report over the telemetry and the index, as text,
JSON, or one self-contained HTML page with the charts a person would rather look at.

The page: archives and recalls over time, the α and β distributions of the scored
folders, the recall lanes picked, the pending backlog (as archives left it, and by era
now), and the share of the context window the recall block added; then the text report.
It is one file (inline CSS and SVG from :mod:`rofmd.cli.report_svg`; no script, no font or
image to fetch), written atomically, so it can be mailed, archived or opened offline.

Read-only like the other operator tools (:mod:`rofmd.cli.store_views`): the stores are read
without recovery, nothing under the memory root changes. Times on the page are UTC; the
bucket of the time charts is the smallest of minute … week that keeps them within
:data:`MAX_BUCKETS` bars.

Exit codes: 0, 1 failure (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from engine.jsonio import write_bytes_atomic
from engine.scoring.era_audit import era_totals, store_eras
from engine.store import read_jsonl
from engine.store.readonly import ReadonlyStore
from rofmd.cli.json_out import print_json
from rofmd.cli.report_svg import PALETTE, Series, bar_chart, hbar_chart, line_chart
from rofmd.cli.stats_report import build_report, render_report, timeline
from rofmd.cli.store_views import add_store_options, guarded, now_ms, read_listed
from rofmd.cli.where import CliError, locate

__all__ = ["add_report_parser", "choose_bucket", "render_page"]

MAX_BUCKETS = 48
BUCKETS_MS = (
    ("minute", 60_000),
    ("5 minutes", 300_000),
    ("15 minutes", 900_000),
    ("hour", 3_600_000),
    ("6 hours", 21_600_000),
    ("day", 86_400_000),
    ("week", 604_800_000),
)
ALPHA_BINS = 10
BETA_RANGE = range(-10, 11)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;
color:#222;background:#fff;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:15px;margin:0 0 6px;color:#333}
.sub{color:#666;margin-bottom:18px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:20px}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px;background:#f7f9fc}
.card b{display:block;font-size:20px;color:#1f4e79}.card span{color:#555;font-size:12px}
.grid{display:flex;flex-wrap:wrap;gap:18px}
figure{margin:0;border:1px solid #e3e3e3;border-radius:6px;padding:10px;background:#fff;
width:540px}
figcaption{color:#666;font-size:12px;max-width:560px;margin-top:4px}
pre{background:#f6f6f6;border:1px solid #e3e3e3;border-radius:6px;padding:12px;
overflow-x:auto;font-size:12px}
"""


def choose_bucket(first_ms: int, last_ms: int) -> tuple[str, int]:
    """The smallest bucket that keeps ``first_ms``..``last_ms`` within MAX_BUCKETS."""
    for name, size in BUCKETS_MS:
        if last_ms // size - first_ms // size < MAX_BUCKETS:
            return name, size
    name, size = BUCKETS_MS[-1]
    span = last_ms // size - first_ms // size + 1
    return f"{-(-span // MAX_BUCKETS)} weeks", size * -(-span // MAX_BUCKETS)


def _utc(ms: int, size: int) -> str:
    fmt = "%H:%M" if size < 3_600_000 else "%m-%d %H:%M" if size < 86_400_000 else "%Y-%m-%d"
    return time.strftime(fmt, time.gmtime(ms / 1000))


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%".replace(".0%", "%")


def _times(records: Sequence[dict[str, Any]]) -> list[int]:
    return [
        int(r["time"])
        for r in records
        if isinstance(r.get("time"), int | float) and not isinstance(r.get("time"), bool)
    ]


def _histograms(entries: Sequence[Any]) -> tuple[list[float], list[float], int]:
    """α in ALPHA_BINS bins over 0..1, β per whole number over -10..10, of the scored
    folders; and how many folders are pending (no scores yet)."""
    alpha = [0.0] * ALPHA_BINS
    beta = [0.0] * len(BETA_RANGE)
    pending = 0
    for e in entries:
        if e.scored is False:
            pending += 1
            continue
        a = min(max(float(e.alpha), 0.0), 1.0)
        alpha[min(ALPHA_BINS - 1, int(a * ALPHA_BINS))] += 1
        b = min(max(round(float(e.beta)), BETA_RANGE.start), BETA_RANGE.stop - 1)
        beta[b - BETA_RANGE.start] += 1
    return alpha, beta, pending


def _figure(title: str, svg: str, caption: str) -> str:
    return (
        f"<figure><h2>{escape(title)}</h2>{svg}<figcaption>{escape(caption)}</figcaption></figure>"
    )


def render_page(
    stores: Sequence[ReadonlyStore],
    records: Sequence[dict[str, Any]],
    rep: dict[str, Any],
    *,
    root: Path,
    generated_ms: int,
) -> str:
    """The whole page for these stores, their telemetry and the report built from it."""
    entries = [e for s in stores for e in s.index]
    times = _times(records)
    if times:
        bucket_name, bucket = choose_bucket(min(times), max(times))
        rows = timeline(records, bucket)
    else:
        bucket_name, bucket, rows = "day", 86_400_000, []
    labels = [_utc(r["start"], bucket) for r in rows]
    rc, cp = rep["recall"], rep["compress"]
    alpha, beta, pending_now = _histograms(entries)
    scored = len(entries) - pending_now
    share = rc["shareOfWindow"]
    cards = [
        (len(entries), "memory folders"),
        (pending_now, "pending (unscored)"),
        (cp["count"], "archives"),
        (rc["rounds"], "recall rounds"),
        (rc["recalled"], "memories recalled"),
        ("n/a" if share is None else _pct(share), "of the window added back"),
    ]
    lanes = [(k, float(v)) for k, v in sorted(rc["lanes"].items(), key=lambda kv: -kv[1]) if v]
    eras = rep.get("eras") or {}
    by_era = eras.get("pendingByEra") or {}
    figures = [
        _figure(
            f"Archived folders and recalled memories per {bucket_name}",
            bar_chart(
                f"Archived folders and recalled memories per {bucket_name}",
                labels,
                [
                    Series("folders archived", [r["folders"] for r in rows], PALETTE[0]),
                    Series("memories recalled", [r["recalled"] for r in rows], PALETTE[1]),
                ],
            ),
            f"{cp['count']} archives wrote {cp['folders']} folders; {rc['rounds']} recall"
            f" rounds brought back {rc['recalled']} memories (UTC, per {bucket_name}).",
        ),
        _figure(
            "α of the scored folders",
            bar_chart(
                "α of the scored folders",
                [f"{i / ALPHA_BINS:.1f}" for i in range(ALPHA_BINS)],
                [Series("folders", alpha, PALETTE[2])],
                empty="no scored folder yet",
            ),
            f"Importance α (0..1, bins of 0.1) of {scored} scored folders.",
        ),
        _figure(
            "β of the scored folders",
            bar_chart(
                "β of the scored folders",
                [str(b) for b in BETA_RANGE],
                [Series("folders", beta, PALETTE[4])],
                label_every=5,
                empty="no scored folder yet",
            ),
            "Trust β (-10..10, rounded): below 0 the model doubted the memory.",
        ),
        _figure(
            "Recall lanes picked",
            hbar_chart("Recall lanes picked", lanes, color=PALETTE[6], empty="no recall yet"),
            "Which FAIR-DRI lane (or mode) each recalled memory came through.",
        ),
        _figure(
            "Pending backlog after each archive",
            line_chart(
                "Pending backlog after each archive",
                labels,
                [Series("pending folders", [r["pending"] for r in rows], PALETTE[3])],
                empty="no archive yet",
            ),
            f"Folders waiting for memory_judge as archives left them; now {pending_now}"
            + (
                f" (legacy {by_era.get('legacy', 0)}, synthetic {by_era.get('synthetic', 0)},"
                f" current {by_era.get('current', 0)})."
                if by_era
                else "."
            ),
        ),
        _figure(
            "Recall block share of the context window",
            line_chart(
                "Recall block share of the context window",
                labels,
                [Series("share", [r["shareOfWindow"] for r in rows], PALETTE[5])],
                fmt=_pct,
                whole=False,
                empty="no recall with a known window yet",
            ),
            "Tokens the recall block added, over the context window, per "
            f"{bucket_name} (overall {'n/a' if share is None else _pct(share)}).",
        ),
    ]
    sessions = ", ".join(s.session_id for s in stores) or "none"
    generated = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(generated_ms / 1000))
    card_html = "".join(
        f'<div class="card"><b>{escape(str(v))}</b><span>{escape(t)}</span></div>' for v, t in cards
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>rofmd report</title><style>{CSS}</style></head><body>"
        "<h1>rofmd memory report</h1>"
        f'<div class="sub">{escape(str(root))} · sessions: {escape(sessions)} ·'
        f" {len(records)} telemetry records · generated {generated}</div>"
        f'<div class="cards">{card_html}</div>'
        f'<div class="grid">{"".join(figures)}</div>'
        f'<h2 style="margin-top:20px">All figures</h2><pre>{escape(render_report(rep))}</pre>'
        "</body></html>\n"
    )


def cmd_report(args: argparse.Namespace) -> int:
    """The §1.6 report of the selected stores (default: every store)."""
    where = locate(args)
    stores = read_listed(where, args.session)
    by_store = {s.session_id: list(read_jsonl(s.paths.stats)) for s in stores}
    records = [r for s in stores for r in by_store[s.session_id]]
    eras = era_totals([store_eras(s.session_id, s.index, by_store[s.session_id]) for s in stores])
    rep = build_report(records, eras)
    rep = {"memoryRoot": str(where.root), "sessions": [s.session_id for s in stores], **rep}
    if args.html is None:
        if args.json:
            print_json(rep)
        else:
            print(f"memory root {where.root}  sessions: {', '.join(rep['sessions']) or 'none'}")
            print(render_report(rep))
        return 0
    out = Path(args.html).expanduser().absolute()
    if out.is_dir() or not out.parent.is_dir():
        raise CliError(f"{out}: not a file in an existing directory")
    page = render_page(stores, records, rep, root=where.root, generated_ms=now_ms(args))
    write_bytes_atomic(out, page.encode("utf-8"))
    summary = {
        "html": str(out),
        "bytes": len(page.encode("utf-8")),
        "sessions": rep["sessions"],
        "records": len(records),
        "folders": sum(len(s.index) for s in stores),
    }
    if args.json:
        print_json(summary)
    else:
        print(f"wrote {out} ({summary['records']} records, {summary['folders']} folders)")
    return 0


def add_report_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `report` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "report",
        help="the recall / archive report (text, --json, or --html FILE: a page with charts)",
        description="The §1.6 report over stats.jsonl and the index, read-only. --html writes "
        "one self-contained page (inline CSS and SVG, no script, nothing fetched).",
    )
    add_store_options(p, session_help="only this session (default: every session)")
    p.add_argument(
        "--html", type=Path, metavar="FILE", help="write the report as an HTML page to FILE"
    )
    p.set_defaults(func=guarded("report", cmd_report))
