"""Where a request's list lies in its JSON line (`_jsonspans.c`), where it was built.

Why: ``handlers.validated_once`` looks up the surface a host sends with every
`agent/pre-step` (500 KB at a 128k-token window) among the surfaces it validated
before, by comparing JSON bytes. Without the line it must encode the parsed surface
again to get them, and the strings a request was just parsed into have no UTF-8 form
yet: that one encoding is 0.3–0.7 ms of every such request. The line already holds
those bytes; :func:`member_items` finds them (a scan at memchr speed, a sixth of the
encoding) and where each item ends, so the look-up compares the surface as the host
wrote it.

Exact or nothing (`_jsonspans.c`): None whenever the bytes found could be other than
the parsed list's (a key written twice or with an escape, another shape), and the
caller encodes as before. Without the compiled module, or with
``ROFMD_KERNELS=false``, it is always None: the same answers, slower.
"""

from __future__ import annotations

from typing import Protocol

from engine.compiled import CompiledModule

__all__ = ["Compiled", "active", "available", "member_items", "state"]


class Compiled(Protocol):
    """What `_jsonspans.c` defines."""

    def member_items(
        self, line: bytes, outer: bytes, inner: bytes, /
    ) -> tuple[int, int, list[int]] | None:
        """The offsets of `line`'s ``outer.inner`` array (its `[` to past its `]`) and
        each item's end counted from the `[`; None when they would not be exact."""


_module: CompiledModule[Compiled] = CompiledModule("engine._jsonspans")


def available() -> bool:
    """Whether the compiled module was built and loads."""
    return _module.available()


def state(wanted: bool) -> str:
    """`on`, `off` or `not built` for `ROFMD_KERNELS` = `wanted` (`rofmd doctor`)."""
    return _module.state(wanted)


def active() -> Compiled | None:
    """The compiled module when built and turned on (`engine.compiled`), else None."""
    return _module.active()


def member_items(line: bytes, outer: str, inner: str) -> tuple[bytes, list[int]] | None:
    """The JSON text of the array `line` holds as member `inner` of its member `outer`,
    as the line writes it, and the offset just past each of its items in that text
    (the first item starts after the `[`); None when the compiled module is not in use
    or the answer would not be exact (module docstring)."""
    module = _module.active()
    if module is None:
        return None
    found = module.member_items(line, outer.encode(), inner.encode())
    if found is None:
        return None
    start, end, ends = found
    return line[start:end], ends
