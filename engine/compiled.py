"""Optional compiled modules: used where they were built, unless turned off.

Why optional: `make` and the wheel's build hook compile them with the machine's C
compiler (`hatch_build.py`). Where there is none, or a build fails, each caller has a
Python path that computes the same, only slower, so rofmd runs either way. The daemon
setting `ROFMD_KERNELS=false` turns every one of them off (:func:`use_compiled`): the
rollback to the pure-Python paths, one switch for all of them.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar, cast

__all__ = ["CompiledModule", "use_compiled"]

M = TypeVar("M")


class CompiledModule(Generic[M]):
    """One compiled module: loaded at import when it was built (else absent), and
    switched on or off process-wide."""

    def __init__(self, name: str) -> None:
        self.name = name
        try:
            self._module: M | None = cast(M, importlib.import_module(name))
        except ImportError:  # not built on this machine: the Python path serves
            self._module = None
        self._on = self._module is not None
        _ALL.append(self)

    def available(self) -> bool:
        """Whether the module was built and loads."""
        return self._module is not None

    def active(self) -> M | None:
        """The module when it is built and turned on, else None."""
        return self._module if self._on else None

    def state(self, wanted: bool) -> str:
        """What `ROFMD_KERNELS` = `wanted` gives: `on`, `off` or `not built` (what
        `status` and `rofmd doctor` say)."""
        if not self.available():
            return "not built"
        return "on" if wanted else "off"

    def use(self, on: bool) -> bool:
        """Turn the module on or off; whether it is now in use."""
        self._on = on and self._module is not None
        return self._on


_ALL: list[CompiledModule[Any]] = []


def use_compiled(on: bool) -> None:
    """Turn every compiled module on or off (`ROFMD_KERNELS`)."""
    for module in _ALL:
        module.use(on)
