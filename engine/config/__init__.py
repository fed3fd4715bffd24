"""Memory configuration: typed model, leniency, layering and paths (reference §3).

The public surface the daemon and the handlers use::

    from engine.config import (MemoryConfig, ENGINE_DEFAULTS, ConfigFileError, ConfigBuild,
        read_config_file, load_config, build_config, packaged_config_path,
        resolve_memory_root, fingerprint)

:mod:`engine.config.model` is the one place a key is named (type, default, bound) and
holds the reading notes on the reference; :mod:`~engine.config.validate` derives the
per-key leniency from it and :mod:`~engine.config.layers` stacks the layers.
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
    env_overrides,
    load_config,
    read_config_file,
)
from engine.config.model import MemoryConfig
from engine.config.paths import DEFAULT_STORAGE_DIR, packaged_config_path, resolve_memory_root
from engine.config.validate import deep_merge

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
