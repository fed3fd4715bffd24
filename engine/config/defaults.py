"""The engine defaults as a plain JSON tree, and the packaged product's differences.

:data:`ENGINE_DEFAULTS` is ``MemoryConfig()`` dumped (the reference's ``DEFAULT_CONFIG``,
key for key): the tree layers deep-merge onto and ``config.json`` is diffed against. The
packaged product defaults differ from it in exactly :data:`PRODUCT_OVERRIDES` and, where
the product goes beyond the reference on purpose, :data:`BEYOND_REFERENCE`. Nothing here
is mutated at run time: callers get deep copies via :func:`engine_defaults`.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from engine.config.model import MemoryConfig

#: Keys that are never merged anywhere in a config tree. The reference drops them
#: because of JavaScript prototype pollution; we drop them too so that a config file
#: written for the original plugin behaves identically here (and so that a hostile
#: file cannot smuggle data through keys every other tool treats specially).
FORBIDDEN_KEYS: Final[frozenset[str]] = frozenset({"__proto__", "constructor", "prototype"})

ENGINE_DEFAULTS: Final[dict[str, Any]] = MemoryConfig().to_json()

#: The documented differences between the engine defaults and the packaged product
#: defaults (reference §3: "六处有意不同": the engine's ``index`` modes and host-local
#: timezone), as dotted path -> product value.
PRODUCT_OVERRIDES: Final[dict[str, Any]] = {
    "time.mode": "constrain",
    "event.mode": "constrain",
    "location.mode": "constrain",
    "person.mode": "constrain",
    "timeTag.mode": "constrain",
    "time.timezone": "Asia/Shanghai",
}

#: Where the product goes beyond the reference on purpose, as dotted path -> product
#: value. The engine keeps the reference's value, so setting it in a user config is
#: the rollback switch (README, "Recall").
BEYOND_REFERENCE: Final[dict[str, Any]] = {"recall.mode": "ranked"}


def engine_defaults() -> dict[str, Any]:
    """Return a fresh deep copy of :data:`ENGINE_DEFAULTS`, safe for the caller to mutate."""
    return copy.deepcopy(ENGINE_DEFAULTS)


def product_defaults() -> dict[str, Any]:
    """Engine defaults with :data:`PRODUCT_OVERRIDES` and :data:`BEYOND_REFERENCE`
    applied: what ``config.json`` ships (the daemon reads the file, never this)."""
    tree = engine_defaults()
    for dotted, value in {**PRODUCT_OVERRIDES, **BEYOND_REFERENCE}.items():
        *parents, leaf = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        node[leaf] = value
    return tree
