"""Large session stores on disk for the daemon benchmarks, built once and cached.

A store is what archiving and scoring leave behind, written directly (no daemon, no
fsyncs: it is a fixture): per folder a ``mem-…`` directory with ``meta.json`` (a
model-scored folder: α, β, 3–16 keywords, sometimes events, persons, locations and
assistant phrases) and ``context.json`` (its text as alternating user and assistant
messages), ``index.json`` with every folder's row, and the relevance index snapshot
the daemon would have written after its first build (`engine.relevance.folder_text`),
so that loading a session costs what a restart costs, not a 70 s rebuild at 10⁵. The
folders' words are `bench.ranked`'s corpus (Zipf-like, English and Chinese).

Building 10⁵ folders and their relevance index takes minutes, so a built memory root is
kept under the cache directory (``$BENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/rofmd-bench``,
else ``~/.cache/rofmd-bench``) with a stamp naming what it holds; a run reuses it after
removing what the previous run's daemon wrote (recall state, telemetry, logs). The
snapshot names its store's directory, so the daemon must use the memory root where it was
built: a run takes the cached root in place, it never copies it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.ranked import make_corpus
from engine.config import load_config
from engine.jsonio import dumps_json
from engine.relevance.folder_text import save_index, synced_index
from engine.store import open_session
from engine.store.ids import folder_stamp
from engine.store.indexfile import write_index
from engine.store.records import FolderMeta, index_row_from_meta, to_json_dict

__all__ = ["StoreSpec", "cache_root", "prepared_root", "reset_root"]

STORE_VERSION = 1
"""Bumped whenever what a store holds changes (its stamp then no longer matches)."""
BASE_MS = 1_780_000_000_000
STAMP = "stamp.json"
DAEMON_FILES = ("daemon.log", "run", "cfg")
"""What `tests.e2e.harness.running_daemon` leaves in its base directory."""


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """One session of ``folders`` folders, its words drawn with ``seed``."""

    session_id: str
    folders: int
    seed: int


def cache_root() -> Path:
    """Where built stores are kept between runs (see the module docstring)."""
    explicit = os.environ.get("BENCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rofmd-bench"


def folder_id(i: int) -> str:
    """The i-th folder's id: one archive a minute, in order."""
    return f"mem-{folder_stamp(BASE_MS + i * 60_000)}-0001"


def _meta(i: int, alpha: float, keywords: list[str], lines: list[str]) -> dict[str, Any]:
    at = BASE_MS + i * 60_000
    meta: dict[str, Any] = {
        "id": folder_id(i),
        "createdAt": at,
        "alpha": alpha,
        "beta": (i % 7) - 3,
        "scored": True,
        "rescorePending": False,
        "keywords": keywords,
        "title": lines[0][:40],
        "scoreMode": "model",
        "archivedByVersion": "0.1.0",
        "archivedFrom": "adapter",
        "idempotencyKey": f'["bench",{i},1,9,"h{i:x}",0]',
        "alphaSource": "llm",
        "betaSource": "llm",
        "keywordsSource": "llm",
        "judgedAt": at + 30_000,
        "messageCount": len(lines),
    }
    if i % 3 == 0:
        meta["events"] = [keywords[0]]
    if i % 4 == 0:
        meta["persons"] = [f"person{i % 97}"]
    if i % 5 == 0:
        meta["locations"] = [f"城市{i % 31}"]
    if i % 2 == 0:
        meta["assistantKeywords"] = [" ".join(lines[-1].split()[:3])]
    if i % 6 == 0:
        meta["eventStart"] = at - 86_400_000
        meta["eventEnd"] = at - 3_600_000
    return meta


def _context(i: int, lines: list[str]) -> dict[str, Any]:
    at = BASE_MS + i * 60_000
    return {
        "messages": [
            {
                "role": "user" if n % 2 == 0 else "assistant",
                "time": at - (len(lines) - n) * 1000,
                "content": [{"type": "text", "text": line}],
            }
            for n, line in enumerate(lines)
        ]
    }


def _build_session(root: Path, spec: StoreSpec) -> None:
    store = open_session(root, spec.session_id)
    entries, texts, _ = make_corpus(spec.folders, seed=spec.seed)
    rows: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        lines = texts[entry.id].split("\n")
        meta = FolderMeta.model_validate(_meta(i, entry.alpha, list(entry.keywords), lines))
        folder = store.paths.folder(meta.id)
        folder.mkdir()
        (folder / "meta.json").write_bytes(dumps_json(to_json_dict(meta)))
        (folder / "context.json").write_bytes(dumps_json(_context(i, lines)))
        rows.append(index_row_from_meta(meta))
    write_index(store.paths, rows, {})
    reopened = open_session(root, spec.session_id)
    assert reopened.load_report.clean and len(reopened) == spec.folders
    stopwords = load_config(None, {}).config.keywords.extra_stopwords
    index, unreadable = synced_index(None, reopened, stopwords)
    assert not unreadable and len(index) == spec.folders
    save_index(index)


def _stamp(specs: Sequence[StoreSpec]) -> bytes:
    return orjson.dumps(
        {
            "version": STORE_VERSION,
            "sessions": [[s.session_id, s.folders, s.seed] for s in specs],
        }
    )


def _session_files(root: Path) -> dict[str, list[str]]:
    sessions = root / "sessions"
    return {
        d.name: sorted(p.name for p in d.iterdir() if not p.name.startswith("mem-"))
        for d in sorted(sessions.iterdir())
        if d.is_dir()
    }


def reset_root(base: Path) -> None:
    """Remove what a run wrote into a built base directory: the daemon's files, and any
    file beside the folders that the build did not leave (recall state, telemetry)."""
    for name in DAEMON_FILES:
        path = base / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    kept = orjson.loads((base / STAMP).read_bytes())["files"]
    root = base / "mem"
    for session, names in _session_files(root).items():
        for name in set(names) - set(kept.get(session, ())):
            path = root / "sessions" / session / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


def prepared_root(name: str, specs: Sequence[StoreSpec]) -> Path:
    """The base directory for `running_daemon(base=…)`: ``mem/`` holds the stores of
    ``specs``, built now unless the cache holds them already (then reset)."""
    base = cache_root() / name
    stamp = base / STAMP
    want = _stamp(specs)
    if stamp.is_file():
        have = orjson.loads(stamp.read_bytes())
        if orjson.dumps({k: have[k] for k in ("version", "sessions")}) == want:
            reset_root(base)
            return base
    if base.exists():
        shutil.rmtree(base)
    (base / "mem").mkdir(parents=True)
    for spec in specs:
        _build_session(base / "mem", spec)
    doc = orjson.loads(want)
    doc["files"] = _session_files(base / "mem")
    stamp.write_bytes(orjson.dumps(doc))
    return base
