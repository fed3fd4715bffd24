"""Memory configuration: typed model, leniency, layering and paths (reference §3).

:mod:`engine.config.model` is the one place a key is named (type, default, bound) and
holds the reading notes on the reference; :mod:`~engine.config.validate` derives the
per-key leniency from it and :mod:`~engine.config.layers` stacks the layers.
"""

from __future__ import annotations

from engine.config.defaults import BEYOND_REFERENCE as BEYOND_REFERENCE
from engine.config.defaults import ENGINE_DEFAULTS as ENGINE_DEFAULTS
from engine.config.defaults import PRODUCT_OVERRIDES as PRODUCT_OVERRIDES
from engine.config.fingerprint import canonical_json as canonical_json
from engine.config.fingerprint import fingerprint as fingerprint
from engine.config.layers import ConfigBuild as ConfigBuild
from engine.config.layers import ConfigFileError as ConfigFileError
from engine.config.layers import build_config as build_config
from engine.config.layers import env_overrides as env_overrides
from engine.config.layers import load_config as load_config
from engine.config.layers import read_config_file as read_config_file
from engine.config.model import MemoryConfig as MemoryConfig
from engine.config.paths import packaged_config_path as packaged_config_path
from engine.config.paths import resolve_memory_root as resolve_memory_root
from engine.config.validate import deep_merge as deep_merge
