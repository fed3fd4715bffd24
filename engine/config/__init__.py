"""Memory configuration: typed model, leniency, layering and paths (reference §3).

:mod:`engine.config.model` is the one place a key is named (type, default, bound) and
holds the reading notes on the reference; :mod:`~engine.config.validate` derives the
per-key leniency from it and :mod:`~engine.config.layers` stacks the layers.
"""

from __future__ import annotations

from engine.config.defaults import BEYOND_REFERENCE, ENGINE_DEFAULTS, PRODUCT_OVERRIDES
from engine.config.fingerprint import canonical_json, fingerprint
from engine.config.layers import (
    ConfigBuild,
    ConfigFileError,
    build_config,
    env_overrides,
    load_config,
    read_config_file,
)
from engine.config.model import MemoryConfig
from engine.config.paths import packaged_config_path, resolve_memory_root
from engine.config.validate import deep_merge

__all__ = [
    "BEYOND_REFERENCE",
    "ENGINE_DEFAULTS",
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
