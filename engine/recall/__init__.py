"""Automatic recall (reference §1.3, §1.3.1, §1.4, §1.7, §1.13.3-§1.13.5, §1.14.1-§1.15,
§1.17, §3.1).

Pure and synchronous; time is passed in. Modules::

    query.py       user message -> keywords (cap 16), match keys, clauses, quota
    assistant_said.py  「你说过」 quote detection and the channel's query keys (cap 8)
    candidates.py  in-memory index over index.json: postings by match key, bigram
                   index for "query key inside folder key", category postings, the
                   「你说过」 channel's text
    ranked.py      relevance-first selection (ranked, the packaged default; beyond the
                   reference) over engine.relevance's BM25F and passage index
    fair.py        FAIR-DRI lanes (fair) and plain DRI (deterministic)
    select.py      one round's selection: the 「你说过」 reserve, one question or several
                   (clauses.py: a protected slot each, then turns), the high-relevance
                   reserve, `recall.hops` descendants (hops.py)
    legacy.py      v1.3.0 probability path (erf generations, seeded PRNG from prng.py)
    block.py       entry / block rendering, image path expansion, tags line
    dates.py       computeDates: weekday, 归档于 X（事件时间 Y）, relative-time notes
    state.py       recall-state v3 (reads v2/v1); implements RecallBlockView
    round.py       one round: select, read picks, round budget, commit, trim (the ranked
                   block follows the conversation: `trim_ranked`), telemetry
    tag_index.py   event / location / person labels -> folders (inside the candidate
                   index, kept by its updates), mentions of known labels in a message
    constraint.py  what one constraint kind hands to memory_recall's search
    events.py      memory_recall's event states (empty / exact / similar / unknown)
    tags.py        location / person filters (five states, tagInfo) and the automatic
                   recall's mention filter
    browse.py      memory_recall without keywords: what the constraints allow
"""

from engine.recall.candidates import CandidateIndex, Matches, Seed, index_params
from engine.recall.query import Query, analyze_query, effective_quota
from engine.recall.round import (
    RENDER_READS,
    Prepared,
    RoundOutcome,
    load_addition,
    prepare_state,
    run_round,
)
from engine.recall.state import (
    Addition,
    DiscardedState,
    Lanes,
    RecallState,
    load_state_file,
    read_state_file,
)

__all__ = [
    "RENDER_READS",
    "Addition",
    "CandidateIndex",
    "DiscardedState",
    "Lanes",
    "Matches",
    "Prepared",
    "Query",
    "RecallState",
    "RoundOutcome",
    "Seed",
    "analyze_query",
    "effective_quota",
    "index_params",
    "load_addition",
    "load_state_file",
    "prepare_state",
    "read_state_file",
    "run_round",
]
