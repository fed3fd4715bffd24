"""The memory task block, dsh-rofm:memory-tasks (reference §1.2, §1.11, §1.12, §1.16).

Layout (fixed lines verbatim from :mod:`engine.texts`)::

    ## 记忆评分任务（dsh-rofm）
    <blank>
    intro line
    **这是本轮必须完成的工作：…**
    ### 待评分的新归档记忆（需要 alpha / beta / keywords）
    1. id=mem-… · 类型=user · 已等待 2 小时 · 标题=…
       原文：
       user: …
    ### 已有事件标签（同一事件请复用，不要另造近义标签）     (only with pending items)
    日本旅行（3）、登录重构项目（2）
    ### 待复核的已召回记忆（只需判断 alpha / beta 是否要修改，不新建记忆）
    1. id=mem-… · 标题=… · 现有 α=0.75 β=+2.0 · 关键词=…
       上次评分理由：…
       原文：
       user: …
    评分口径：
    - … rubric lines …
    无法判断或不需要修改时，对相应 id 提交 keep=true。

Budget (v1.4.0 P0-1): the whole block is bounded by ``min(scoring.taskMaxTokens, window ×
scoring.taskBudgetPercent%)``. The fixed lines (header, rubric, headings, label list) are
paid first; what is left goes to items. With both lists present the pending list gets at
most 60 % of it and the review list the rest. Inside a list every item keeps its head
lines, and the item texts share the list's budget by water-filling: short texts are
shown whole, long ones are cut to a common cap and marked 「…（受任务区块预算限制，原文已截断）」.
When that cap would drop below 60 tokens, items are left out from the end instead and
one line says how many were not listed. At least one item of a non-empty list is always
shown (with a 60-token text), even past the budget: a block that lists nothing can never
drain. The label list is cut to what fits next to one minimal item per list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from engine import texts
from engine.scoring.budget import estimate_tokens, slice_to_tokens, to_well_formed

LIST_LIMIT: Final = 100
"""TASKS_LIST_LIMIT: at most 100 pending + 100 review items per block (v1.2)."""
PENDING_SHARE: Final = 0.6
MIN_ITEM_TOKENS: Final = 60
DEFAULT_WINDOW_TOKENS: Final = 128_000
"""Window assumed before the host reported one (``compress.contextWindowTokens`` wins)."""

_MINUTE: Final = 60_000
_HOUR: Final = 60 * _MINUTE
_DAY: Final = 24 * _HOUR


@dataclass(frozen=True, slots=True)
class PendingItem:
    """A folder waiting for its first score."""

    id: str
    title: str
    kind: str
    since_ms: int
    text: str


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """A scored folder marked ``rescorePending``."""

    id: str
    title: str
    alpha: float
    beta: float
    keywords: Sequence[str]
    reason: str
    text: str


@dataclass(frozen=True, slots=True)
class TaskBlockInput:
    """Everything the block shows; lists already ordered and limited."""

    pending: Sequence[PendingItem]
    review: Sequence[ReviewItem]
    labels: Sequence[tuple[str, int]]
    has_recall_block: bool
    now_ms: int
    budget_tokens: int
    pending_total: int | None = None
    review_total: int | None = None
    channel: bool = False


@dataclass(frozen=True, slots=True)
class TaskBlock:
    """The rendered block and what it listed."""

    text: str
    pending_ids: tuple[str, ...] = ()
    review_ids: tuple[str, ...] = ()
    truncated_ids: tuple[str, ...] = ()
    omitted_pending: int = 0
    omitted_review: int = 0
    tokens: int = 0
    labels: tuple[str, ...] = field(default=())


def task_budget(window_tokens: int | None, *, max_tokens: int, percent: float) -> int:
    """``min(scoring.taskMaxTokens, window × scoring.taskBudgetPercent%)``."""
    window = window_tokens if window_tokens and window_tokens > 0 else DEFAULT_WINDOW_TOKENS
    return max(0, min(int(max_tokens), int(window * float(percent) / 100)))


def format_alpha(alpha: float) -> str:
    """α as the model reads it: up to 4 decimals, no trailing zeros (0.75, 1, 0.01)."""
    text = f"{round(float(alpha), 4) + 0.0:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def format_beta(beta: float) -> str:
    """β with sign and one decimal (+2.0, -3.5, +0.0)."""
    return f"{round(float(beta), 1) + 0.0:+.1f}"


def format_age(age_ms: int) -> str:
    """已等待 N 分钟 / 小时 / 天."""
    if age_ms < _MINUTE:
        return texts.TASKS_AGE_UNDER_MINUTE
    if age_ms < _HOUR:
        return texts.TASKS_AGE_MINUTES.format(n=age_ms // _MINUTE)
    if age_ms < _DAY:
        return texts.TASKS_AGE_HOURS.format(n=age_ms // _HOUR)
    return texts.TASKS_AGE_DAYS.format(n=age_ms // _DAY)


T = TypeVar("T")


def order_pending(items: Sequence[T], order: str, since: Callable[[T], tuple[int, str]]) -> list[T]:
    """``scoring.order``: newest (default) / oldest (v1.3.0 FIFO) / mixed (alternating)."""
    oldest = sorted(items, key=since)
    newest = oldest[::-1]
    if order == "oldest":
        return oldest
    if order == "mixed":
        out: list[T] = []
        i, j, n = 0, 0, len(items)
        while len(out) < n:
            if len(out) % 2 == 0:
                out.append(newest[i])
                i += 1
            else:
                out.append(oldest[j])
                j += 1
            if i + j >= n:
                break
        return out
    return newest


def first_in_order(oldest_first: Sequence[T], order: str, limit: int) -> list[T]:
    """``order_pending(items, order, key)[:limit]`` for items already sorted by ``key``,
    touching only the ``limit`` items it returns (the pending list can be the whole
    session; the block shows at most ``LIST_LIMIT``)."""
    n = len(oldest_first)
    k = max(0, min(limit, n))
    if order == "oldest":
        return list(oldest_first[:k])
    if order == "mixed":
        newest = list(oldest_first[n - (k + 1) // 2 :])[::-1]
        oldest = list(oldest_first[: k // 2])
        return [newest[t // 2] if t % 2 == 0 else oldest[t // 2] for t in range(k)]
    return list(oldest_first[n - k :])[::-1]


def _one_line(text: str) -> str:
    return " ".join(to_well_formed(text).split())


def _indent(text: str) -> str:
    return "\n".join(texts.TASKS_TEXT_INDENT + line for line in text.split("\n"))


@dataclass(frozen=True, slots=True)
class _Rendered:
    """One item's lines and their costs (each line's estimate + 1 for its line end),
    measured once: the budget fitting asks for them many times."""

    id: str
    head: str
    body: str  # indented text, without the truncation mark
    head_tokens: int
    body_tokens: int


def _rendered(folder_id: str, head: str, body: str) -> _Rendered:
    return _Rendered(folder_id, head, body, estimate_tokens(head) + 1, estimate_tokens(body) + 1)


def _pending_rendered(item: PendingItem, n: int, now_ms: int) -> _Rendered:
    head = texts.TASKS_PENDING_ITEM.format(
        n=n,
        id=item.id,
        kind=item.kind,
        age=format_age(max(0, now_ms - item.since_ms)),
        title=_one_line(item.title) or texts.TASKS_NONE,
    )
    body = item.text.strip() or texts.TASKS_NO_CONVERSATION
    return _rendered(item.id, head + "\n" + texts.TASKS_TEXT_LABEL, _indent(to_well_formed(body)))


def _review_rendered(item: ReviewItem, n: int) -> _Rendered:
    keywords = texts.TASKS_KEYWORD_SEPARATOR.join(_one_line(k) for k in item.keywords)
    head = texts.TASKS_REVIEW_ITEM.format(
        n=n,
        id=item.id,
        title=_one_line(item.title) or texts.TASKS_NONE,
        alpha=format_alpha(item.alpha),
        beta=format_beta(item.beta),
        keywords=keywords or texts.TASKS_NONE,
    )
    reason = texts.TASKS_REVIEW_REASON.format(reason=_one_line(item.reason) or texts.TASKS_NONE)
    body = item.text.strip() or texts.TASKS_NO_CONVERSATION
    return _rendered(
        item.id, head + "\n" + reason + "\n" + texts.TASKS_TEXT_LABEL, _indent(to_well_formed(body))
    )


@dataclass(slots=True)
class _Fitted:
    lines: list[str]
    shown: list[str]
    truncated: list[str]
    omitted: int
    tokens: int


def cap_for(heads: int, bodies: Sequence[int], share: int) -> int:
    """The largest text cap c ≤ max(bodies) with heads + Σ min(body, c) ≤ share (−1 if
    even c=0 fails; ``bodies`` not empty).

    Water-filling in one pass over the sorted costs: while the cap lies between two body
    costs, the total grows by one per item not yet under the cap, so the cap solves a
    division."""
    if heads > share:
        return -1
    room = share - heads
    below = 0
    ordered = sorted(bodies)
    for j, body in enumerate(ordered):
        over = len(ordered) - j  # items whose cost is at least this body's
        if below + over * body > room:
            return (room - below) // over
        below += body
    return ordered[-1]


def _cap_for(items: Sequence[_Rendered], share: int) -> int:
    return cap_for(sum(r.head_tokens for r in items), [r.body_tokens for r in items], share)


def _fit(items: Sequence[_Rendered], share: int, total: int) -> _Fitted:
    """Lay out one list inside ``share`` tokens (rules in the module docstring)."""
    if not items:
        return _Fitted([], [], [], 0, 0)
    full = sum(r.head_tokens + r.body_tokens for r in items)
    if full <= share:
        whole = [r.head + "\n" + r.body for r in items]
        return _Fitted(whole, [r.id for r in items], [], max(0, total - len(items)), full)
    mark_tokens = estimate_tokens(texts.TASKS_TRUNCATED)
    hint_tokens = estimate_tokens(texts.TASKS_OMITTED.format(n=total)) + 1
    k = len(items)
    cap = _cap_for(items, share)
    while k > 1 and cap < MIN_ITEM_TOKENS:
        k -= 1
        cap = _cap_for(items[:k], share - hint_tokens)
    cap = max(cap, MIN_ITEM_TOKENS)
    lines: list[str] = []
    truncated: list[str] = []
    used = 0
    for r in items[:k]:
        if r.body_tokens <= cap:
            body = r.body
        else:
            body = (
                slice_to_tokens(r.body, max(1, cap - mark_tokens)).rstrip() + texts.TASKS_TRUNCATED
            )
            truncated.append(r.id)
        lines.append(r.head + "\n" + body)
        used += r.head_tokens + estimate_tokens(body) + 1
    omitted = total - k
    if k < len(items):
        lines.append(texts.TASKS_OMITTED.format(n=omitted))
    return _Fitted(lines, [r.id for r in items[:k]], truncated, max(0, omitted), used)


def rubric_lines(*, channel: bool) -> list[str]:
    """The rubric (评分口径), with the channel line for QQ channel sessions."""
    lines = [texts.TASKS_RUBRIC_HEADING, texts.TASKS_RUBRIC_ALPHA]
    if channel:
        lines.append(texts.TASKS_RUBRIC_CHANNEL)
    lines += [
        texts.TASKS_RUBRIC_BETA,
        texts.TASKS_RUBRIC_KEYWORDS,
        texts.TASKS_RUBRIC_CATEGORY,
        texts.TASKS_RUBRIC_EVENTS,
        texts.TASKS_RUBRIC_LOCATIONS,
        texts.TASKS_RUBRIC_PERSONS,
        texts.TASKS_RUBRIC_TIME_TAGS,
        texts.TASKS_RUBRIC_TAGS_IN_KEYWORDS,
        texts.TASKS_RUBRIC_MERGE,
        texts.TASKS_RUBRIC_FULL_TEXT,
        texts.TASKS_RUBRIC_REVIEW,
        texts.TASKS_RUBRIC_KEEP,
    ]
    return lines


def render_task_block(inp: TaskBlockInput) -> TaskBlock:
    """The section text for ``inp`` (empty when there is nothing to ask)."""
    pending = list(inp.pending[:LIST_LIMIT])
    review = list(inp.review[:LIST_LIMIT])
    if not pending and not review:
        text = texts.TASKS_EMPTY_WITH_RECALL if inp.has_recall_block else ""
        return TaskBlock(text, tokens=estimate_tokens(text))
    pending_total = max(len(pending), inp.pending_total or 0)
    review_total = max(len(review), inp.review_total or 0)
    head = [texts.TASKS_HEADING, "", texts.TASKS_INTRO, texts.TASKS_MUST_DO]
    rubric = rubric_lines(channel=inp.channel)
    fixed = head + rubric
    if pending:
        fixed.append(texts.TASKS_PENDING_HEADING)
    if review:
        fixed.append(texts.TASKS_REVIEW_HEADING)
    fixed_tokens = sum(estimate_tokens(line) + 1 for line in fixed)
    budget = max(0, inp.budget_tokens)
    rendered_p = [_pending_rendered(it, i + 1, inp.now_ms) for i, it in enumerate(pending)]
    rendered_r = [_review_rendered(it, i + 1) for i, it in enumerate(review)]
    # Existing labels: only with pending items; cut to what fits next to one minimal item
    # per list.
    labels: list[str] = []
    if pending and inp.labels:
        reserve = sum(r[0].head_tokens + MIN_ITEM_TOKENS for r in (rendered_p, rendered_r) if r)
        room = budget - fixed_tokens - reserve - estimate_tokens(texts.TASKS_LABELS_HEADING) - 1
        for label, count in inp.labels:
            entry = texts.TASKS_LABEL.format(label=_one_line(label), count=count)
            cost = estimate_tokens(entry) + 1
            if cost > room:
                break
            labels.append(entry)
            room -= cost
    labels_tokens = (
        estimate_tokens(texts.TASKS_LABELS_HEADING)
        + 1
        + estimate_tokens(texts.TASKS_LABEL_SEPARATOR.join(labels))
        + 1
        if labels
        else 0
    )
    items_budget = max(0, budget - fixed_tokens - labels_tokens)
    if pending and review:
        fp = _fit(rendered_p, int(items_budget * PENDING_SHARE), pending_total)
        fr = _fit(rendered_r, items_budget - fp.tokens, review_total)
    else:
        fp = _fit(rendered_p, items_budget, pending_total)
        fr = _fit(rendered_r, items_budget, review_total)
    lines = list(head)
    if pending:
        lines.append(texts.TASKS_PENDING_HEADING)
        lines += fp.lines
    if labels:
        lines.append(texts.TASKS_LABELS_HEADING)
        lines.append(texts.TASKS_LABEL_SEPARATOR.join(labels))
    if review:
        lines.append(texts.TASKS_REVIEW_HEADING)
        lines += fr.lines
    lines += rubric
    text = to_well_formed("\n".join(lines))
    return TaskBlock(
        text,
        pending_ids=tuple(fp.shown),
        review_ids=tuple(fr.shown),
        truncated_ids=tuple(fp.truncated + fr.truncated),
        omitted_pending=fp.omitted,
        omitted_review=fr.omitted,
        tokens=estimate_tokens(text),
        labels=tuple(labels),
    )
