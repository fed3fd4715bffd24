"""`rofmd search QUERY [--session ID] [--limit N] [--json]`: ranked search over a store,
for a person, touching nothing.

The ranking is the relevance index recall's `ranked` mode uses (`engine.relevance`:
BM25F over each folder's conversation, title, keywords, events, persons and locations,
reranked by the best passage, with `recall.ranked.alphaPrior` and `passageWeight`), built
in memory from the store read without recovery (from the session's snapshot when it has
one, reading only the folders that changed since). It covers the scored folders, as
recall does; pending folders are found once they are scored. Unlike `memory_recall` and
`rofmd engine recall`, no recall state is read or written, no `recall.minAlpha`,
suppression or block exclusion applies (a suppressed memory is marked), and nothing is
appended: the memory root may be read-only. The query is searched as recall searches a
message: its Chinese question words (什么时候, 哪里, 谁 …) are left out, since the memory
that answers holds the answer where the question has them.

Each hit prints its title, id, archive date (and event date, when it has one), α, β, the
score, and the line of its text that matches the query best, cut around the first match.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from engine.config import MemoryConfig
from engine.jsonio import CorruptJSONError, read_json
from engine.recall.hygiene import HYGIENE_FILE, Hygiene
from engine.recall.query import search_text
from engine.relevance.analyzer import search_terms
from engine.relevance.folder_text import SNAPSHOT_NAME, text_version
from engine.relevance.index import RelevanceIndex
from engine.relevance.snapshot import SnapshotError, read_snapshot
from engine.scoring.fallback import heuristic_text
from engine.store import CorruptFolderError, StoreError
from engine.store.readonly import ReadonlyStore
from engine.timeexpr.civil import resolve_timezone, to_local, valid_ms
from rofmd.cli.json_out import print_json
from rofmd.cli.store_views import add_store_options, guarded, read_listed
from rofmd.cli.where import UsageError, locate

__all__ = ["add_search_parser", "relevance_of", "snippet"]

LIMIT_MAX = 100
SNIPPET_CHARS = 120


def _text_reader(store: ReadonlyStore) -> Any:
    def text_of(folder_id: str) -> str | None:
        try:
            return heuristic_text(store.read_context(folder_id))
        except (CorruptFolderError, StoreError, OSError, ValueError):
            return None

    return text_of


def relevance_of(store: ReadonlyStore, cfg: MemoryConfig) -> RelevanceIndex:
    """The store's relevance index, in memory: its snapshot synced when there is a usable
    one (the daemon's file, only read), else a fresh build."""
    extra = tuple(cfg.keywords.extra_stopwords)
    text_of = _text_reader(store)
    index: RelevanceIndex | None = None
    try:
        index = read_snapshot(
            store.paths.dir / SNAPSHOT_NAME,
            text_of,
            owner=str(store.paths.dir),
            extra_stopwords=extra,
            text_version=text_version(),
        )
        index.sync(store.index)
    except (FileNotFoundError, SnapshotError, OSError, ValueError):
        index = None
    if index is None:
        index = RelevanceIndex(text_of, extra_stopwords=extra)
        index.sync(store.index)
    return index


def snippet(text: str, query: str, extra_stopwords: tuple[str, ...] = ()) -> str:
    """The line of ``text`` holding most of the query's terms, cut to about
    :data:`SNIPPET_CHARS` around its first match (ellipses where it was cut)."""
    terms = set(search_terms(query, extra_stopwords))
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if not lines:
        return ""
    best = max(lines, key=lambda line: len(terms & set(search_terms(line, extra_stopwords))))
    folded = best.casefold()
    hits = [i for i in (folded.find(t) for t in terms if t) if i >= 0]
    at = min(hits) if hits else 0
    start = max(0, min(at - SNIPPET_CHARS // 3, len(best) - SNIPPET_CHARS))
    cut = best[start : start + SNIPPET_CHARS]
    cut = re.sub(r"\s+", " ", cut)
    return ("…" if start > 0 else "") + cut + ("…" if start + SNIPPET_CHARS < len(best) else "")


def _suppressed(store: ReadonlyStore) -> frozenset[str]:
    try:
        doc = read_json(store.paths.dir / HYGIENE_FILE)
    except (FileNotFoundError, CorruptJSONError):
        return frozenset()
    return Hygiene.from_json(doc).hidden()


def _when(ms: Any, cfg: MemoryConfig) -> str | None:
    if not valid_ms(ms):
        return None
    return to_local(int(ms), resolve_timezone(cfg.time.timezone)).strftime("%Y-%m-%d %H:%M")


def search_store(store: ReadonlyStore, cfg: MemoryConfig, query: str, limit: int) -> dict[str, Any]:
    """The hits of ``query`` in one store, best first."""
    index = relevance_of(store, cfg)
    rc = cfg.recall.ranked
    ranked = index.rank(
        index.query_terms(search_text(query)),
        limit=limit,
        alpha_prior=rc.alpha_prior,
        min_alpha=0.0,
        min_relative=0.0,
        passage_weight=rc.passage_weight,
    )
    hidden = _suppressed(store)
    extra = tuple(cfg.keywords.extra_stopwords)
    hits = []
    for fid, score in zip(ranked.ids[:limit], ranked.scores, strict=False):
        e = store.entries[fid]
        text = _text_reader(store)(fid) or ""
        event = _when(e.eventStart, cfg) if e.eventTimeSource in ("messages", "judge") else None
        hits.append(
            {
                "id": fid,
                "title": e.title,
                "score": round(score, 6),
                "createdAt": e.createdAt,
                "date": _when(e.createdAt, cfg),
                "eventDate": event,
                "alpha": e.alpha,
                "beta": e.beta,
                "keywords": list(e.keywords),
                "suppressed": fid in hidden,
                "snippet": snippet(text, query, extra),
            }
        )
    return {
        "session": store.session_id,
        "dir": str(store.dir),
        "searched": index.docs,
        "pending": sum(1 for e in store.index if not e.scored),
        "hits": hits,
    }


def cmd_search(args: argparse.Namespace) -> int:
    """Print the best folders for QUERY (module docstring)."""
    query = " ".join(args.query).strip()
    if not query:
        raise UsageError("QUERY must not be empty")
    if not 1 <= args.limit <= LIMIT_MAX:
        raise UsageError(f"--limit must be within 1..{LIMIT_MAX}, got {args.limit}")
    where = locate(args)
    results = [
        search_store(s, where.cfg, query, args.limit) for s in read_listed(where, args.session)
    ]
    if args.json:
        print_json({"memoryRoot": str(where.root), "query": query, "sessions": results})
        return 0
    if not results:
        print(f"no sessions under {where.root}")
        return 0
    for r in results:
        pending = f" ({r['pending']} pending not searched)" if r["pending"] else ""
        print(
            f'search "{query}" in session {r["session"]}: {len(r["hits"])} result(s) of'
            f" {r['searched']} scored folder(s){pending}"
        )
        for n, h in enumerate(r["hits"], start=1):
            when = h["date"] or "?"
            if h["eventDate"] and h["eventDate"] != h["date"]:
                when += f" (event {h['eventDate']})"
            mark = "  [suppressed]" if h["suppressed"] else ""
            print(
                f"{n:>3}. {h['title'] or '(untitled)'} — {h['id']} · {when} · α {h['alpha']:.2f}"
                f" β {h['beta']:+.1f} · score {h['score']:.3f}{mark}"
            )
            if h["snippet"]:
                print(f"     {h['snippet']}")
    return 0


def add_search_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `search` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "search",
        help="ranked search over the memories, with titles and snippets (read-only)",
        description="Ranked search over a store's scored memories. Writes nothing: no recall"
        " state, no telemetry.",
    )
    p.add_argument("query", nargs="+", metavar="QUERY", help="what to look for")
    add_store_options(p, session_help="only this session (default: every session)")
    p.add_argument(
        "--limit", type=int, default=10, help=f"results per session, 1..{LIMIT_MAX} (default 10)"
    )
    p.set_defaults(func=guarded("search", cmd_search))
