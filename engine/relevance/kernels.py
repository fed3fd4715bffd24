"""The ranked recall's compiled inner loops (`_kernels.c`), when they were built.

Why C: a ranked selection is a few dozen NumPy calls over short arrays, and at 10^4
folders their fixed cost per call, not the arithmetic, was the time: 1.5× bm25s's query
time where the goal is half of it, with no NumPy formulation left to try (issue 9's
record). `score_top` makes a whole `RelevanceIndex.rank` once the query's terms are
known: the BM25F scores with max-score pruning (in place of `engine.relevance.maxscore`),
the best-passage rerank, the cuts and the order. `passage_best` is the rerank alone
(`PassageStore.best`).

They compute what the NumPy code computes, float for float (the same double operations
in the same order, no fused multiply-add, tf parts rounded to float32): property tests
hold every ranking to the NumPy path's. So they are optional: `make` builds them with
the machine's C compiler (`python hatch_build.py`, also the wheel's build hook); without
a compiler the NumPy path serves, the same picks, slower. The daemon setting
`ROFMD_KERNELS=false` turns them off (`use_kernels`).
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.compiled import CompiledModule

__all__ = ["Compiled", "active", "available", "state", "use_kernels"]


class Compiled(Protocol):
    """What `_kernels.c` defines (each function's comment there says what it computes)."""

    def score_top(
        self,
        terms: list[tuple[Any, Any, float, float]],
        n: int,
        table: Any,
        lengths: Any,
        avg_q: float,
        escapes_ok: bool,
        factor: Any,
        top_factor: float,
        floor: float,
        pool: int,
        tiny: float,
        acc: Any,
        touched: Any,
        vals: Any,
        finish: tuple[Any, ...],
        /,
    ) -> tuple[tuple[str, ...], tuple[float, ...]] | None: ...

    def passage_best(
        self,
        docs: list[int],
        q: list[int],
        idf: list[float],
        passages: tuple[Any, ...],
        factor: Any,
        /,
    ) -> list[float]: ...


_loops: CompiledModule[Compiled] = CompiledModule("engine.relevance._kernels")


def available() -> bool:
    """Whether the compiled loops were built and load."""
    return _loops.available()


def active() -> Compiled | None:
    """The compiled loops when they are built and turned on, else None."""
    return _loops.active()


def state(wanted: bool) -> str:
    """What `ROFMD_KERNELS` = `wanted` gives: `on`, `off` or `not built` (the NumPy path
    serves either way but the first): what `status` and `rofmd doctor` say."""
    return _loops.state(wanted)


def use_kernels(on: bool) -> bool:
    """Turn the compiled loops alone on or off (process-wide); whether they are now in
    use. The daemon turns every compiled module on or off at once
    (`engine.compiled.use_compiled`)."""
    return _loops.use(on)
