"""`make bench`: start a daemon, run every benchmark, print a table and save JSON."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

from bench.archive import run_archive
from bench.inbox import run_inbox
from bench.judge import run_judge_bench
from bench.ping import run_ping
from bench.ranked import run_ranked_bench
from bench.recall import run_recall_bench
from bench.restart import run_restart
from bench.rss import breakdown, run_rss
from bench.status import run_status
from engine.relevance.kernels import use_kernels
from tests.e2e.harness import running_daemon

_PARTS = ("ping", "archive", "recall", "ranked", "judge", "status", "inbox", "rss", "restart")


def _print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}")
    cols = list(rows[0])
    print("  " + "  ".join(f"{c:>10}" for c in cols))
    for r in rows:
        print("  " + "  ".join(f"{r[c]!s:>10}" for c in cols))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; `--quick` runs a small version for smoke tests."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--json", type=Path, help="also write results to this file")
    parser.add_argument(
        "--only",
        choices=_PARTS,
        action="append",
        help="run only this part (repeatable; default: all)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        help="folder counts of the recall and ranked parts, comma-separated",
    )
    parser.add_argument(
        "--numpy",
        action="store_true",
        help="the ranked part on the NumPy path, without the compiled recall loops (the"
        " daemons the other parts start use them when built)",
    )
    args = parser.parse_args(argv)
    if args.numpy:
        use_kernels(False)
    parts = set(args.only or _PARTS)
    scale = 10 if args.quick else 1
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if parts & {"ping", "archive", "status"}:
        _daemon_parts(parts, scale, results)
    sizes = args.sizes or ((1000, 10000) if args.quick else (1000, 10000, 100000))
    if "recall" in parts:
        recall_rows = run_recall_bench(sizes, 200 // scale)
        results["recall"] = recall_rows
        _print_rows(
            "automatic recall round vs bm25s top-10 (same folders' keywords, same queries)",
            recall_rows,
        )
    if "ranked" in parts:
        ranked_rows = run_ranked_bench(sizes, 300 // scale)
        results["ranked"] = ranked_rows
        _print_rows(
            "ranked recall (selection, and the whole round) vs bm25s top-10"
            " (same folders' documents, same query terms, interleaved)",
            ranked_rows,
        )
    if "judge" in parts:
        judge_rows = run_judge_bench(sizes, 20 if scale == 1 else 4)
        results["judge"] = judge_rows
        _print_rows(
            "memory_judge of 5 folders: plan, metas + index rows, telemetry (medians; ratio: to"
            " writing the same meta.json bytes atomically; bytes through the store's fs seam)",
            judge_rows,
        )
    if "inbox" in parts:
        inbox_rows = run_inbox(3, 10, **({"sessions": 4, "folders": 2000} if args.quick else {}))
        results["inbox"] = inbox_rows
        _print_rows(
            "agent/inbox/inserted on loaded sessions (ranked recall; medians of 3 repetitions;"
            " ratios: to the ping p50 of the same clients just before, interleaved)",
            inbox_rows,
        )
    if "rss" in parts:
        folders = 2000 if args.quick else 100_000
        rss_rows = run_rss(3 if scale == 1 else 1, 100 // scale, folders=folders)
        results["rss"] = rss_rows
        _print_rows(
            "daemon resident size after load and recall rounds (one session; a fresh daemon"
            " per mode, modes alternated; settled: 2 s later; restart: a second daemon over"
            " the snapshots the first left; goal at 10^5 folders: <= 200 MB)",
            rss_rows,
        )
        parts_row = breakdown(folders)
        results["rss_breakdown"] = parts_row
        _print_rows("where the bytes are (traced in this process, one loaded session)", [parts_row])
    if "restart" in parts:
        restart_rows = run_restart(
            (2000,) if args.quick else (10_000, 100_000), 1 if args.quick else 3
        )
        results["restart"] = restart_rows
        _print_rows(
            "first recall after restart: the first agent/inbox/inserted of a session on a"
            " fresh daemon (medians; cpu: the daemon's; goal_x: wall over the 0.5 s goal)",
            restart_rows,
        )
    out = args.json or Path("bench/results/latest.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(f"\nresults written to {out}")
    return 0


def _daemon_parts(parts: set[str], scale: int, results: dict[str, Any]) -> None:
    """The parts that talk to a running daemon: ping round trips, agent/pre-step."""
    with running_daemon(env={"ROFMD_LOG_LEVEL": "warning"}) as d:
        rows: list[dict[str, Any]] = []
        if "ping" in parts:
            rows = [
                anyio.run(run_ping, d.socket_path, 1, 5000 // scale),
                anyio.run(run_ping, d.socket_path, 50, 200 // scale),
                anyio.run(lambda: run_ping(d.socket_path, 50, 200 // scale, session=True)),
            ]
            rows[2]["clients"] = "50 (sess)"
        archive_rows = (
            run_archive(d.socket_path, max(3, 20 // scale), d.memory_root)
            if "archive" in parts
            else []
        )
        status_rows = [run_status(d.socket_path, 30 // scale)] if "status" in parts else []
    if rows:
        results["ping"] = rows
        _print_rows("ping round trips (one daemon process, clients on one event loop)", rows)
    if status_rows:
        results["status"] = status_rows
        _print_rows(
            "`rofmd status` as a command against this daemon (medians; ratio: to"
            " `python -c pass`, interleaved)",
            status_rows,
        )
    if archive_rows:
        results["archive"] = archive_rows
        _print_rows(
            "agent/pre-step on a 128k-token, 400-message surface (medians; ratio: to reading"
            " + parsing the same request bytes, interleaved)",
            archive_rows,
        )


if __name__ == "__main__":
    sys.exit(main())
