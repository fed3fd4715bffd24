"""Reading config files and building the effective config from its layers.

Layer order (reference §3, adapted to a daemon): engine defaults <- packaged
``config.json`` <- the user's ``config.json`` <- ``config.local.json`` <- environment,
deep-merged per field (objects recursively; arrays and scalars replace) as
pydantic-settings sources. Their merge only overlays and cannot say "a bad value falls
back to the layer below", so each source is its layer already cleaned against the stack
below (:func:`engine.config.validate.clean_layer`); cross-field rules run once at the end.

A file that is not JSON, or not a JSON object, is a different problem: it raises
:class:`ConfigFileError` so the daemon keeps its last good config and says exactly why
(the reference does the same with a half-written file).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from engine.config.defaults import ENGINE_DEFAULTS, FORBIDDEN_KEYS
from engine.config.model import MemoryConfig
from engine.config.paths import packaged_config_path
from engine.config.validate import Warn, clean_layer, cross_check, deep_merge, describe, json_kind

ENV_PREFIX: Final = "ROFMD_CONFIG__"
ENV_SOURCE: Final = "environment"
ENGINE_DEFAULTS_SOURCE: Final = "engine-defaults"
USER_CONFIG_NAME: Final = "config.json"
LOCAL_CONFIG_NAME: Final = "config.local.json"


class ConfigFileError(Exception):
    """A config file exists but cannot be used (unreadable, not JSON, not an object).
    ``str(err)`` is one line naming the file (and, for JSON syntax errors, the line and
    column), ready for a log line or a ``config/reload`` error list."""

    def __init__(
        self, path: Path, reason: str, *, line: int | None = None, column: int | None = None
    ) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        self.column = column
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{path}: {reason}{where}")


@dataclass(frozen=True)
class ConfigBuild:
    """The result of layering: the typed config plus what it took to get there.

    ``raw``: the plain deep merge of all layers (forbidden keys stripped, nothing
    validated), to show what was written. ``warnings``: each value rejected, clamped or
    normalised, prefixed by its layer. ``sources``: the layers applied, lowest first.
    ``unknown``: the dotted paths of keys the config does not know (kept, ignored).
    """

    config: MemoryConfig
    raw: dict[str, Any]
    warnings: tuple[str, ...]
    sources: tuple[str, ...]
    unknown: tuple[str, ...] = ()


def read_config_file(path: Path) -> dict[str, Any] | None:
    """Read one JSON config file: ``None`` if it does not exist, its object otherwise.

    Raises :class:`ConfigFileError` if unreadable, empty, invalid JSON (with line and
    column) or not an object. A UTF-8 BOM is tolerated: common Windows editors write one.
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise ConfigFileError(path, "is a directory, expected a JSON file") from None
    except OSError as exc:
        raise ConfigFileError(path, f"cannot read: {exc.strerror or exc}") from None
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM
    if not data.strip():
        raise ConfigFileError(path, "file is empty, expected a JSON object")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigFileError(
            path, f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno
        ) from None
    if not isinstance(value, dict):
        kind = json_kind(value)
        article = "" if kind == "null" else "an " if kind[0] in "aeiou" else "a "
        raise ConfigFileError(path, f"top-level JSON value is {article}{kind}, expected an object")
    return value


def strip_forbidden(value: Any, warn: Warn, path: str = "") -> Any:
    """Deep copy of ``value`` without :data:`FORBIDDEN_KEYS`, at every depth (in arrays
    too), applied to each layer before anything merges so such keys never reach the
    merged tree, the model or ``raw``. Non-string keys (a Python mapping's) go the same way.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or key in FORBIDDEN_KEYS:
                warn(f"{where}: forbidden key dropped")
                continue
            out[key] = strip_forbidden(item, warn, where)
        return out
    if isinstance(value, list | tuple):
        return [strip_forbidden(item, warn, f"{path}[{i}]") for i, item in enumerate(value)]
    return copy.deepcopy(value)


def _match_env_path(segments: Sequence[str]) -> list[str] | None:
    """The key path of :data:`ENGINE_DEFAULTS` (entries of open objects such as
    ``importance.weights`` included) the env segments name, case-insensitively."""
    node: Any = ENGINE_DEFAULTS
    path: list[str] = []
    for segment in segments:
        keys = {key.casefold(): key for key in node} if isinstance(node, Mapping) else {}
        key = keys.get(segment.casefold())
        if key is None:
            return None
        path.append(key)
        node = node[key]
    return path or None


def env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``ROFMD_CONFIG__SECTION__KEY[__SUBKEY...]`` variables as one layer: returns
    ``(layer, used_names, warnings)``. Prefix and keys match case-insensitively; a name
    matching no known key is reported and ignored. Variables apply shallowest first, then
    by name, so ``ROFMD_CONFIG__RECALL='{...}'`` is refined by ``..._RECALL__MODE``.
    """
    matched: list[tuple[int, str, list[str], str]] = []
    warnings: list[str] = []
    for name, text in environ.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        segments = name[len(ENV_PREFIX) :].split("__")
        path = _match_env_path(segments) if all(segments) else None
        if path is None:
            warnings.append(f"{ENV_SOURCE}: {name}: no such config key; ignored")
            continue
        matched.append((len(path), name, path, text))
    layer: dict[str, Any] = {}
    used: list[str] = []
    for _depth, name, path, text in sorted(matched, key=lambda item: (item[0], item[1])):
        try:  # JSON if it parses (numbers, booleans, arrays, objects, quoted strings)
            patch: Any = orjson.loads(text)
        except orjson.JSONDecodeError:
            patch = text
        for key in reversed(path):
            patch = {key: patch}
        layer = deep_merge(layer, patch)
        used.append(name)
    return layer, used, warnings


#: The layers of the build in progress, lowest first (pydantic-settings asks the settings
#: class for its sources; only versions newer than our floor take them in the constructor).
_LAYERS: ContextVar[tuple[Mapping[str, Any], ...]] = ContextVar("config_layers")


class _LayerStack(BaseSettings):
    """The merged tree of :data:`_LAYERS`: no fields, every key kept as an extra."""

    model_config = SettingsConfigDict(extra="allow")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], *builtin: Any, **named_builtin: Any
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only our layers, highest first, each an init source of a copy of its tree (so the
        # merge shares no object with ENGINE_DEFAULTS); the built-in sources stay out.
        layers = reversed(_LAYERS.get())
        return tuple(InitSettingsSource(settings_cls, copy.deepcopy(dict(t))) for t in layers)


def _stack(layers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    token = _LAYERS.set(tuple(layers))
    try:
        return dict(_LayerStack().model_extra or {})
    finally:
        _LAYERS.reset(token)


def build_config(layers: Sequence[tuple[str, Mapping[str, Any]]]) -> ConfigBuild:
    """Layer ``(source name, tree)`` pairs over the engine defaults, in order.

    Never raises for a bad *value*: every problem is a warning and the key keeps the
    value from below."""
    clean: list[Mapping[str, Any]] = [ENGINE_DEFAULTS]
    merged, raw = copy.deepcopy(ENGINE_DEFAULTS), copy.deepcopy(ENGINE_DEFAULTS)
    warnings: list[str] = []
    unknown: list[str] = []
    sources = [ENGINE_DEFAULTS_SOURCE]
    for source, layer in layers:

        def warn(message: str, _source: str = source) -> None:
            warnings.append(f"{_source}: {message}")

        if not isinstance(layer, Mapping):
            warn(f"layer is {describe(layer)}, expected an object; ignored")
            continue
        stripped = strip_forbidden(layer, warn)
        raw = deep_merge(raw, stripped)
        clean.append(clean_layer(merged, stripped, warn, unknown))
        merged = _stack(clean)
        sources.append(source)
    cross_check(merged, lambda message: warnings.append(f"config: {message}"))
    return ConfigBuild(
        config=MemoryConfig.model_validate(merged),
        raw=raw,
        warnings=tuple(warnings),
        sources=tuple(sources),
        unknown=tuple(dict.fromkeys(unknown)),
    )


def load_config(config_dir: Path | None, environ: Mapping[str, str]) -> ConfigBuild:
    """The full layering the daemon uses: the packaged ``config.json``, then
    ``<config_dir>/config.json`` and ``config.local.json`` (each optional), then the
    ``ROFMD_CONFIG__*`` variables of ``environ``. Raises :class:`ConfigFileError` if a
    present file is unusable; the caller then keeps its last good config.
    """
    packaged = packaged_config_path()
    paths = [packaged]
    if config_dir is not None:
        paths += [config_dir / USER_CONFIG_NAME, config_dir / LOCAL_CONFIG_NAME]
    layers: list[tuple[str, Mapping[str, Any]]] = []
    notes: list[str] = []
    for path in paths:
        tree = read_config_file(path)
        if tree is not None:
            layers.append((str(path), tree))
        elif path is packaged:
            notes.append(f"{packaged}: packaged config.json not found; using engine defaults")
    env_layer, used, env_warnings = env_overrides(environ)
    if used:
        layers.append((ENV_SOURCE, env_layer))
    build = build_config(layers)
    return replace(build, warnings=(*notes, *env_warnings, *build.warnings))
