"""Memory configuration: engine defaults, validation, layering and paths (reference §3).

The public surface the daemon and the handlers use::

    from engine.config import (MemoryConfig, ENGINE_DEFAULTS, ConfigFileError, ConfigBuild,
        read_config_file, load_config, build_config, packaged_config_path,
        resolve_memory_root, fingerprint)

Reading notes on the reference, and how they were decided:

* ``recall.computeDates``: the §3 table and the v1.5.4/v1.6.0 notes say "engine default
  false, packaged config true", while §3 also says engine and packaged defaults differ
  in exactly six places (the five ``mode`` switches and ``time.timezone``). We keep the
  six and use the shipped value, ``true``, on both sides.
* ``keywords.max 38 → 316`` in the extracted text is ``3~8 → 3~16``; ``keywords.min`` and
  ``keywords.max`` are clamped into 3..16.
* A wrong-typed value keeps the value of the layers below it (for most keys the engine
  default), so that a typo in a user file does not undo a packaged product default.
* ``recall.categoryMatch.classes`` word lists beyond the quoted heads, and the
  ``importance.weights`` entries ("见文件" in the reference), are rofmd's own.
* Ranges the reference does not give are the natural domain of the value (counts >= 0,
  sizes >= 1, percentages 0..100, ratios and α-like values 0..1).
"""

from __future__ import annotations

from engine.config.defaults import (
    BEYOND_REFERENCE,
    ENGINE_DEFAULTS,
    FORBIDDEN_KEYS,
    PRODUCT_OVERRIDES,
)
from engine.config.fingerprint import canonical_json, fingerprint
from engine.config.layers import (
    ENV_PREFIX,
    ConfigBuild,
    ConfigFileError,
    build_config,
    deep_merge,
    env_overrides,
    load_config,
    read_config_file,
)
from engine.config.model import MemoryConfig
from engine.config.paths import DEFAULT_STORAGE_DIR, packaged_config_path, resolve_memory_root

__all__ = [
    "BEYOND_REFERENCE",
    "DEFAULT_STORAGE_DIR",
    "ENGINE_DEFAULTS",
    "ENV_PREFIX",
    "FORBIDDEN_KEYS",
    "PRODUCT_OVERRIDES",
    "ConfigBuild",
    "ConfigFileError",
    "MemoryConfig",
    "build_config",
    "canonical_json",
    "deep_merge",
    "env_overrides",
    "fingerprint",
    "load_config",
    "packaged_config_path",
    "read_config_file",
    "resolve_memory_root",
]
