"""Inline SVG charts for `rofmd report --html`: bars (grouped), lines and horizontal bars.

Why hand-made: the page must be one self-contained file that renders anywhere, with no
network, no script and no dependency; a few hundred numbers need nothing more than
rectangles, polylines and text. Every label is escaped; every coordinate is computed
from the data alone, so the same figures give the same page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["PALETTE", "Series", "axis_ticks", "bar_chart", "hbar_chart", "line_chart"]

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")
"""Tableau 10's first colours: distinct, and readable by most colour-blind eyes."""

WIDTH = 540
HEIGHT = 240
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 48, 12, 28, 44
AXIS = "#888"
GRID = "#e4e4e4"
TEXT = "#333"


@dataclass(frozen=True, slots=True)
class Series:
    """One named row of values, drawn in one colour (``None``: no value there)."""

    name: str
    values: Sequence[float | None]
    color: str


def axis_ticks(peak: float, *, whole: bool) -> tuple[float, int]:
    """(step, count) of an axis from 0 that reaches ``peak`` in 1, 2 or 5 × 10ⁿ steps, at
    most five of them; ``whole``: counts, so the step is at least 1."""
    if peak <= 0:
        return 1.0, 1
    raw = peak / 5
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if raw <= m * base + 1e-12)
    if whole:
        step = max(1.0, float(round(step)))
    return float(step), max(1, math.ceil(peak / step - 1e-9))


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _frame(title: str, body: list[str], legend: Sequence[Series] = ()) -> str:
    keys = []
    x = PAD_LEFT
    for s in legend:
        keys.append(
            f'<rect x="{x}" y="8" width="10" height="10" fill="{s.color}"/>'
            f'<text x="{x + 14}" y="17" font-size="11" fill="{TEXT}">{escape(s.name)}</text>'
        )
        x += 24 + 7 * len(s.name)
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"'
        f' role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>" + "".join(keys) + "".join(body) + "</svg>"
    )


def _empty(title: str, why: str) -> str:
    return _frame(
        title,
        [
            f'<rect x="1" y="1" width="{WIDTH - 2}" height="{HEIGHT - 2}" fill="#fafafa"'
            f' stroke="{GRID}"/>',
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="13"'
            f' fill="#999">{escape(why)}</text>',
        ],
    )


def _y_axis(step: float, count: int, fmt: Callable[[float], str]) -> list[str]:
    out = []
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    for i in range(count + 1):
        y = HEIGHT - PAD_BOTTOM - plot_h * i / count
        out.append(
            f'<line x1="{PAD_LEFT}" y1="{y:.1f}" x2="{WIDTH - PAD_RIGHT}" y2="{y:.1f}"'
            f' stroke="{GRID if i else AXIS}"/>'
            f'<text x="{PAD_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10"'
            f' fill="{TEXT}">{escape(fmt(step * i))}</text>'
        )
    return out


def _x_labels(labels: Sequence[str], slot: float, every: int | None) -> list[str]:
    if every is None:
        every = max(1, math.ceil(len(labels) / 8))  # at most 8: they must stay readable
    out = []
    for i, label in enumerate(labels):
        if i % every:
            continue
        x = PAD_LEFT + slot * (i + 0.5)
        out.append(
            f'<text x="{x:.1f}" y="{HEIGHT - PAD_BOTTOM + 14}" text-anchor="middle"'
            f' font-size="10" fill="{TEXT}">{escape(label)}</text>'
        )
    return out


def bar_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    fmt: Callable[[float], str] = _num,
    whole: bool = True,
    label_every: int | None = None,
    empty: str = "no data yet",
) -> str:
    """Grouped vertical bars: one group per label, one bar per series (``whole``: the
    values are counts; ``label_every``: label every n-th group, default up to 8 labels)."""
    peak = max((v for s in series for v in s.values if v is not None), default=0.0)
    if not labels or peak <= 0:
        return _empty(title, empty)
    step, count = axis_ticks(peak, whole=whole)
    top = step * count
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    slot = plot_w / len(labels)
    bar = max(1.0, slot * 0.8 / len(series))
    body = _y_axis(step, count, fmt)
    for i in range(len(labels)):
        for j, s in enumerate(series):
            value = s.values[i]
            if not value:
                continue
            h = plot_h * value / top
            x = PAD_LEFT + slot * i + slot * 0.1 + bar * j
            body.append(
                f'<rect x="{x:.1f}" y="{HEIGHT - PAD_BOTTOM - h:.1f}" width="{bar:.1f}"'
                f' height="{h:.1f}" fill="{s.color}"><title>{escape(labels[i])}:'
                f" {escape(fmt(value))} {escape(s.name)}</title></rect>"
            )
    body.extend(_x_labels(labels, slot, label_every))
    return _frame(title, body, series if len(series) > 1 else ())


def line_chart(
    title: str,
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    fmt: Callable[[float], str] = _num,
    whole: bool = True,
    empty: str = "no data yet",
) -> str:
    """Lines over the labels; a missing value breaks its line, a lone point is a dot."""
    peak = max((v for s in series for v in s.values if v is not None), default=None)
    if not labels or peak is None:
        return _empty(title, empty)
    step, count = axis_ticks(peak, whole=whole)
    top = step * count
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    slot = plot_w / len(labels)
    body = _y_axis(step, count, fmt)
    for s in series:
        runs: list[list[tuple[float, float]]] = [[]]
        for i, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            runs[-1].append(
                (PAD_LEFT + slot * (i + 0.5), HEIGHT - PAD_BOTTOM - plot_h * value / top)
            )
        for run in runs:
            if len(run) > 1:
                points = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
                body.append(
                    f'<polyline points="{points}" fill="none" stroke="{s.color}" stroke-width="2"/>'
                )
            for x, y in run:
                body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{s.color}"/>')
    body.extend(_x_labels(labels, slot, None))
    return _frame(title, body, series if len(series) > 1 else ())


def hbar_chart(
    title: str,
    items: Sequence[tuple[str, float]],
    *,
    color: str = PALETTE[0],
    fmt: Callable[[float], str] = _num,
    empty: str = "no data yet",
) -> str:
    """One horizontal bar per item (label, value), in the order given."""
    peak = max((v for _, v in items), default=0.0)
    if not items or peak <= 0:
        return _empty(title, empty)
    left = 110
    row = min(26.0, (HEIGHT - PAD_TOP - 12) / len(items))
    body = []
    for i, (label, value) in enumerate(items):
        y = PAD_TOP + row * i
        w = (WIDTH - left - 60) * value / peak
        body.append(
            f'<text x="{left - 6}" y="{y + row * 0.65:.1f}" text-anchor="end" font-size="11"'
            f' fill="{TEXT}">{escape(label)}</text>'
            f'<rect x="{left}" y="{y + row * 0.15:.1f}" width="{w:.1f}"'
            f' height="{row * 0.7:.1f}" fill="{color}"/>'
            f'<text x="{left + w + 4:.1f}" y="{y + row * 0.65:.1f}" font-size="11"'
            f' fill="{TEXT}">{escape(fmt(value))}</text>'
        )
    return _frame(title, body)
