"""A small seeded PRNG for the legacy recall path (reference §1.3.1 `recall.seed`).

mulberry32: 32-bit state, one multiply-xorshift round per draw, the generator the
JavaScript world uses for reproducible tests. It is tiny, fast, portable and gives
the same sequence on every platform, which is all legacy recall needs (it rolls
"α × p(n)" dice; it is not cryptography).

`recall.seed > 0` seeds it directly. `recall.seed = 0` means "a different roll each
time" in the reference; rofmd never reads an entropy source inside selection, so the
seed is then derived from the session key, the round number and the query
(:func:`derive_seed`): different per round, identical on replay.
"""

from __future__ import annotations

import hashlib

__all__ = ["Mulberry32", "derive_seed"]

_MASK = 0xFFFFFFFF


class Mulberry32:
    """Deterministic uniform floats in [0, 1) from a 32-bit seed."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next_uint32(self) -> int:
        self._state = (self._state + 0x6D2B79F5) & _MASK
        t = self._state
        t = ((t ^ (t >> 15)) * (t | 1)) & _MASK
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & _MASK)) & _MASK
        return (t ^ (t >> 14)) & _MASK

    def next_float(self) -> float:
        """Uniform in [0, 1)."""
        return self.next_uint32() / 4294967296.0


def derive_seed(*parts: object) -> int:
    """A 32-bit seed from stable parts (sha256 of their reprs)."""
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big")
