"""Stable fingerprint of an effective configuration.

recall-state v3 stores a ``configFingerprint`` so that lane cursors persisted under one
configuration are not reused under another: a pure function of the *effective* values,
not changed by key order, number spelling (``60`` vs ``60.0``) or (ignored) unknown keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from engine.config.model import MemoryConfig, json_number_normalise


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, compact, integral floats written as ints."""
    return orjson.dumps(json_number_normalise(value), option=orjson.OPT_SORT_KEYS)


def fingerprint(config: MemoryConfig | Mapping[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of the effective config: of a
    :class:`MemoryConfig` only modelled keys count, a plain mapping is hashed as given."""
    tree = config.to_json(include_unknown=False) if isinstance(config, MemoryConfig) else config
    return hashlib.sha256(canonical_json(tree)).hexdigest()
