"""Several questions in one message: one protected slot per clause (reference §1.13.4).

A message that asks two things used to get one ranking for both, and the second
question often got nothing. With two or more clauses (`engine.recall.query`), each
clause has its own queue of folders, in the order of the recall mode:

* `fair` / `deterministic`: the lanes' picks for the whole message that the clause's
  keywords match (so the lanes' promises and guarantees keep their say), then the rest
  of the clause's candidates in the lanes' order (`engine.recall.fair.lane_order`; σ in
  deterministic); the lanes' picks that no clause matches (register, recycle) form one
  more queue, last;
* `ranked`: the clause's own relevance ranking (`engine.recall.ranked.relevant`); a
  folder already in the block serves the clause without being injected again, as in a
  single-question round.

The quota is then shared (:func:`allocate`): first every clause, in message order, takes
the first folder of its queue not taken yet (its protected slot: never replaced by the
high-relevance reserve), then the clauses take turns, one folder each, until the quota
is used or every queue is empty. A clause without any candidate is reported as
未找到相关记忆 in the block's 本轮子问题召回情况 line (`ClauseResult.found`, counted after
the block is trimmed: the memories in the block relevant to the clause).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.recall.fair import Pick

__all__ = ["Allocation", "ClauseResult", "allocate"]


@dataclass
class ClauseResult:
    """One clause of the round: its text, what it matched, what it got."""

    text: str
    keywords: int
    relevant: set[str] = field(default_factory=set)
    """Ids of the folders relevant to it (its candidates, or its ranking)."""
    protected: str | None = None
    picks: list[str] = field(default_factory=list)
    found: int = 0

    def info(self) -> dict[str, Any]:
        """Its `clauseInfo` telemetry item."""
        return {
            "text": self.text,
            "keywords": self.keywords,
            "candidates": len(self.relevant),
            "protected": self.protected,
            "picks": list(self.picks),
            "found": self.found,
        }


@dataclass
class Allocation:
    """What :func:`allocate` took: new picks in priority order, the ids served from the
    block, and per queue the ids it got (the first one its protected slot)."""

    picks: list[Pick] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    got: list[list[str]] = field(default_factory=list)


def allocate(
    queues: Sequence[Sequence[Pick]],
    k: int,
    *,
    in_block: frozenset[str] | set[str] = frozenset(),
    protect: int | None = None,
) -> Allocation:
    """Share `k` slots among `queues` (module docstring). The first `protect` queues (all
    by default) get a protected slot; a pick whose id is in `in_block` is served, not
    picked, and takes its slot all the same. A folder is taken once."""
    out = Allocation(got=[[] for _ in queues])
    taken: set[str] = set()
    cursors = [0] * len(queues)
    used = 0

    def take_next(i: int, protected: bool) -> bool:
        nonlocal used
        q = queues[i]
        while cursors[i] < len(q):
            p = q[cursors[i]]
            cursors[i] += 1
            if p.id in taken:
                continue
            taken.add(p.id)
            used += 1
            out.got[i].append(p.id)
            if p.id in in_block:
                out.served.append(p.id)
            else:
                p.protected = p.protected or protected
                out.picks.append(p)
            return True
        return False

    limit = len(queues) if protect is None else protect
    for i in range(min(limit, len(queues))):
        if used >= k:
            return out
        take_next(i, True)
    while used < k:
        moved = False
        for i in range(len(queues)):
            if used >= k:
                break
            moved = take_next(i, False) or moved
        if not moved:
            break
    return out
