"""`rofmd audit [--json] [--apply]`: pending folders by era (reference §1.11,
`tools/memory-audit.mjs`).

Read-only by default: the stores are read without recovery and the era rules applied
(`engine.scoring.era_audit`, the same figures selfcheck's "pending era" line and `engine
report` show): folders and pending folders per era (legacy / synthetic / current), the
measures A (every folder), B (legacy left out) and C (current only), the boundary
constants (`--json`), and the legacy and synthetic pending folders by id.

`--apply` writes the era of every pending folder that has no marker yet as `pendingEra`,
into `index.json` only: no `meta.json`, score, keyword or telemetry changes, nothing
re-judged or deleted; a marked folder keeps its era from then on. It opens each store
(its recovery runs, as for any writer), rewrites the index atomically from the store's
rows and drops the index log (`engine.store.index_marks`). One process owns a session
directory, so `--apply` refuses while a daemon answering on `--socket` serves this memory
root.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.scoring.era_audit import StoreEras, boundaries, era_totals, store_eras
from engine.store import read_jsonl
from engine.store.index_marks import write_index_marks
from rofmd.cli.json_out import print_json
from rofmd.cli.store_views import (
    add_store_options,
    guarded,
    listed_stores,
    read_listed,
    serving_daemon,
)
from rofmd.cli.where import CliError, Where, locate
from rofmd.socket_location import SOCKET_ENV

__all__ = ["add_audit_parser"]

SHOWN = 10


def _apply(args: argparse.Namespace, where: Where) -> dict[str, list[str]]:
    """Write the markers (module docstring); session -> folders marked."""
    pid = serving_daemon(args, where.root)
    if pid is not None:
        raise CliError(
            f"the daemon (pid {pid}) serves {where.root}: stop it before --apply (one process"
            " owns a session directory)"
        )
    written: dict[str, list[str]] = {}
    for listed in listed_stores(where, args.session):
        store = where.open_listed(listed.session, listed.paths.dir.name)
        eras = store_eras(store.session_id, store.index, list(read_jsonl(store.paths.stats)))
        if not eras.unmarked:
            continue
        marks = {fid: {"pendingEra": era} for fid, era in eras.unmarked.items()}
        _, changed = write_index_marks(store, marks)
        if changed:
            written[store.session_id] = changed
    return written


def _table(eras: list[StoreEras]) -> list[str]:
    totals = era_totals(eras)
    lines = [
        f"{len(eras)} store(s), {totals.folders} folder(s), {totals.pending} pending",
        f"  {'era':<10} {'folders':>8} {'pending':>8}",
    ]
    for era in ("legacy", "synthetic", "current"):
        lines.append(f"  {era:<10} {totals.folders_by_era[era]:>8} {totals.pending_by_era[era]:>8}")
    for key, m in totals.measures.items():
        share = "n/a" if m["share"] is None else f"{m['share'] * 100:.2f}%"
        lines.append(f"  {key} {m['definition']}: {m['pending']}/{m['folders']} = {share}")
    for s in eras:
        by = {era: len(ids) for era, ids in s.pending_by_era.items()}
        lines.append(
            f"session {s.session}  {s.folders} folders, {s.pending} pending (legacy"
            f" {by['legacy']}, synthetic {by['synthetic']}, current {by['current']});"
            f" fakeWindow {'yes' if s.fake_window else 'no'}, synthetic session"
            f" {'yes' if s.synthetic else 'no'}; {s.marked} marked, {len(s.unmarked)} unmarked"
        )
        for era in ("legacy", "synthetic"):
            ids = s.pending_by_era[era]
            if ids:
                more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
                lines.append(f"  {era} pending: {', '.join(ids[:SHOWN])}{more}")
    return lines


def cmd_audit(args: argparse.Namespace) -> int:
    """Print the era figures; with `--apply`, write the missing markers first."""
    where = locate(args)
    written = _apply(args, where) if args.apply else {}
    stores = read_listed(where, args.session)
    eras = [store_eras(s.session_id, s.index, list(read_jsonl(s.paths.stats))) for s in stores]
    totals = era_totals(eras)
    unmarked = sum(len(s.unmarked) for s in eras)
    if args.json:
        print_json(
            {
                "memoryRoot": str(where.root),
                "boundaries": boundaries(),
                "totals": totals.to_json(),
                "stores": [s.to_json() for s in eras],
                "applied": args.apply,
                "written": written,
                "unmarked": unmarked,
            }
        )
        return 0
    print(f"memory root {where.root}")
    print("\n".join(_table(eras)))
    if args.apply:
        n = sum(len(v) for v in written.values())
        print(
            f"wrote pendingEra on {n} folder(s) in {len(written)} store(s): index.json only,"
            " meta.json untouched"
        )
    elif unmarked:
        print(f"{unmarked} pending folder(s) carry no pendingEra marker (--apply writes them)")
    return 0


def add_audit_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `audit` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "audit",
        help="pending folders by era (read-only; --apply writes only pendingEra in index.json)",
        description="The era audit of pending folders. Read-only unless --apply.",
    )
    add_store_options(p, session_help="only this session (default: every session)")
    p.add_argument(
        "--apply",
        action="store_true",
        help="write pendingEra for unmarked pending folders into index.json (nothing else);"
        " refused while a daemon serves this memory root",
    )
    p.add_argument(
        "--socket",
        dest="socket_path",
        type=Path,
        help=f"the daemon socket --apply checks (env {SOCKET_ENV})",
    )
    p.set_defaults(func=guarded("audit", cmd_audit))
