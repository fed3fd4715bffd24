"""Re-archiving the recall block in pass 0 (reference §1.4).

The recall block is pinned in the system prompt, so ordinary archiving cannot touch
it; pass 0 removes its oldest additions first, by the same ``compressPercent`` share.
Additions injected in the current turn are protected (a multi-step tool turn must keep
what it just recalled). Low-α and non-current-query additions go first, high α last; a
removed high-α addition goes to the high-α recycle lane instead of being marked
``rescorePending``, except in an emergency. No folder is created: each addition
already has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.archive.tokens import MESSAGE_OVERHEAD, estimate_text_tokens
from engine.recall_view import AdditionView

__all__ = ["RearchivePlan", "plan_rearchive"]


@dataclass(slots=True)
class RearchivePlan:
    """What pass 0 takes out of the recall block."""

    target_tokens: int
    removed: list[str] = field(default_factory=list)
    recycle_high: list[str] = field(default_factory=list)
    rescore: list[str] = field(default_factory=list)
    removed_tokens: int = 0

    @property
    def any(self) -> bool:
        return bool(self.removed)


def addition_tokens(add: AdditionView) -> int:
    return estimate_text_tokens(add.text) + MESSAGE_OVERHEAD


def plan_rearchive(
    candidates: Sequence[AdditionView],
    *,
    target_tokens: int,
    turn: int,
    theta_high: float,
    emergency: bool,
) -> RearchivePlan:
    """Pick additions until their tokens reach ``target_tokens`` (or none are left)."""
    plan = RearchivePlan(target_tokens=max(0, target_tokens))
    if plan.target_tokens <= 0:
        return plan
    eligible = [a for a in candidates if a.injected_turn < turn]
    eligible.sort(key=lambda a: (a.alpha >= theta_high, a.current_query, a.created_at, a.id))
    for add in eligible:
        if plan.removed_tokens >= plan.target_tokens:
            break
        plan.removed.append(add.id)
        plan.removed_tokens += addition_tokens(add)
        if add.alpha >= theta_high and not emergency:
            plan.recycle_high.append(add.id)
        else:
            plan.rescore.append(add.id)
    return plan
