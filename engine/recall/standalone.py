"""One recall round without a daemon: the engine CLI and the simulation (reference
"独立运行引擎": ``recall --text "…" --context token=41000 window=128000``).

The same steps the daemon's inbox handler takes (recall state v3 loaded and prepared,
candidate index over the store's index, query analysis, :func:`run_round`, state
saved, ``recall`` and ``recall-block`` records appended), with the turn derived from
the state since there is no host to report it. ``context_tokens`` (how full the
context is) goes into the ``recall`` record so the §1.6 report can say what share of
the context came back.

:func:`search_once` is memory_recall's search for ``rofmd engine recall --limit/--offset``:
the same selection and answer as the tool, and nothing written (no recall state, no
telemetry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.model import MemoryConfig
from engine.recall.candidates import CandidateIndex, index_params
from engine.recall.query import analyze_query
from engine.recall.round import RoundOutcome, prepare_state, run_round
from engine.recall.search import keyword_query, load_entries, search
from engine.recall.search_answer import SearchAnswer, render_answer
from engine.recall.search_args import parse_search_args
from engine.recall.state import RecallState, load_state_file, peek_state_file
from engine.relevance.folder_text import synced_index
from engine.relevance.index import RelevanceIndex
from engine.store import SessionStore

__all__ = [
    "StandaloneRecall",
    "append_round_stats",
    "open_recall_state",
    "recall_once",
    "search_once",
]


def open_recall_state(store: SessionStore, cfg: MemoryConfig) -> RecallState:
    """The session's recall state (``recall-state.json`` when persisted), prepared."""
    path = store.paths.recall_state
    if cfg.recall.persist_injected:
        state = load_state_file(path, persist=True)
    else:
        state = RecallState(path=path, persist=False)
    prepare_state(state, store, cfg)
    return state


@dataclass(slots=True)
class StandaloneRecall:
    """A recall state and the candidate index, reused across rounds of one process."""

    store: SessionStore
    cfg: MemoryConfig
    state: RecallState
    index: CandidateIndex | None = None
    relevance: RelevanceIndex | None = None

    @classmethod
    def open(cls, store: SessionStore, cfg: MemoryConfig) -> StandaloneRecall:
        return cls(store, cfg, open_recall_state(store, cfg))

    def candidate_index(self) -> CandidateIndex:
        key = (self.store.version, index_params(self.cfg))
        if self.index is None or self.index.version != key:
            self.index = CandidateIndex(self.store.index, self.cfg, key)
        return self.index

    def relevance_index(self) -> RelevanceIndex:
        # unreadable folders surface in the round's outcome when picked; a text-less
        # folder is still found by its keywords and title
        self.relevance, _ = synced_index(
            self.relevance, self.store, self.cfg.keywords.extra_stopwords
        )
        return self.relevance

    def next_turn(self) -> int:
        """One past the newest turn a recalled entry was injected in, or past the round."""
        newest = max((a.injected_turn for a in self.state.additions), default=0)
        return max(newest, self.state.round) + 1


def recall_once(
    session: StandaloneRecall,
    text: str,
    *,
    now_ms: int,
    context_window: int | None,
    turn: int | None = None,
) -> RoundOutcome:
    """Run one round for ``text`` and save the state; :func:`append_round_stats` next."""
    store, cfg = session.store, session.cfg
    outcome = run_round(
        store,
        session.candidate_index(),
        session.state,
        analyze_query(text, cfg),
        cfg,
        now_ms=now_ms,
        turn=session.next_turn() if turn is None else turn,
        relevance=session.relevance_index() if cfg.recall.mode == "ranked" else None,
        session_key=store.session_id,
        context_window=context_window,
    )
    session.state.save()
    return outcome


def append_round_stats(store: SessionStore, outcome: RoundOutcome, **extra: Any) -> None:
    """Append the round's ``recall`` (with ``extra`` fields: ``contextTokens``,
    ``elapsedMs``) and ``recall-block`` records, in one durable write as the daemon does
    (`handlers.inbox`): a crash keeps both or neither."""
    if outcome.ran:
        store.append_stats({**outcome.recall_record, **extra}, outcome.block_record)


def search_once(
    store: SessionStore, cfg: MemoryConfig, arguments: Mapping[str, Any]
) -> SearchAnswer:
    """memory_recall's search for `arguments` (the tool's), read-only: the recall state is
    peeked (`peek_state_file`), nothing is saved or appended, so an unpaginated call
    shows what the tool would without recording it in the ledger."""
    args = parse_search_args(arguments, cfg)
    if args.error is not None or not args.keywords:
        return render_answer(args, None, [], cfg)
    state = peek_state_file(store.paths.recall_state)
    prepare_state(state, store, cfg)
    index = CandidateIndex(store.index, cfg, (store.version, index_params(cfg)))
    relevance = None
    if cfg.recall.mode == "ranked":
        relevance, _ = synced_index(None, store, cfg.keywords.extra_stopwords)
    page = search(
        index,
        state,
        keyword_query(args.keywords, cfg),
        cfg,
        limit=args.limit,
        offset=args.offset,
        relevance=relevance,
        session_key=store.session_id,
    )
    entries, unreadable = load_entries(store, page.picks, cfg)
    return render_answer(args, page, entries, cfg, unreadable=len(unreadable))
