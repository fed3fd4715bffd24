"""Reading config files and building the effective config from its layers.

Layer order (reference §3, adapted to a daemon): engine defaults <- packaged
``config.json`` <- the user's ``config.json`` <- ``config.local.json`` <- environment
overrides, stacked as pydantic-settings sources (:class:`_LayerStack`). Layers deep-merge
per field: objects merge recursively, arrays and scalars replace.

pydantic-settings' own merge cannot say "a bad value in a higher layer falls back to the
layer below": it only overlays. So every source yields its layer already cleaned against
the stack below it (:func:`engine.config.validate.clean_layer`), and pydantic-settings
merges the clean layers; the cross-field rules then run once on the result.

File problems are different from value problems: a file that is not JSON, or not a
JSON object, raises :class:`ConfigFileError` so the daemon can keep its last good
config and say exactly why (the reference does the same with a half-written file).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from engine.config.defaults import ENGINE_DEFAULTS, FORBIDDEN_KEYS
from engine.config.model import MemoryConfig
from engine.config.paths import packaged_config_path
from engine.config.validate import Warn, clean_layer, cross_check, deep_merge, describe, json_kind

ENV_PREFIX: Final = "ROFMD_CONFIG__"
ENV_SOURCE: Final = "environment"
ENGINE_DEFAULTS_SOURCE: Final = "engine-defaults"
USER_CONFIG_NAME: Final = "config.json"
LOCAL_CONFIG_NAME: Final = "config.local.json"

_UTF8_BOM: Final = b"\xef\xbb\xbf"


class ConfigFileError(Exception):
    """A config file exists but cannot be used (unreadable, not JSON, not an object).

    ``str(err)`` is one readable line naming the file and, for JSON syntax errors, the
    line and column, ready for a log line or a ``config/reload`` error list.
    """

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

    ``raw`` is the plain deep merge of all layers (forbidden keys stripped, nothing
    validated, unknown keys included), for tools that want to show what was written.
    ``warnings`` lists every value that was rejected, clamped or normalised, prefixed by
    the layer it came from. ``sources`` names the layers applied, lowest first.
    ``unknown`` lists the dotted paths of keys the config does not know (kept, ignored).
    """

    config: MemoryConfig
    raw: dict[str, Any]
    warnings: tuple[str, ...]
    sources: tuple[str, ...]
    unknown: tuple[str, ...] = ()


def _json_kind(value: Any) -> str:
    kind = json_kind(value)
    return kind if kind == "null" else ("an " if kind[0] in "aeiou" else "a ") + kind


def read_config_file(path: Path) -> dict[str, Any] | None:
    """Read one JSON config file: ``None`` if it does not exist, its object otherwise.

    Raises :class:`ConfigFileError` for anything else: unreadable, empty, invalid JSON
    (with line and column) or a top-level value that is not an object. A UTF-8 BOM is
    tolerated because common Windows editors write one.
    """
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError:
        raise ConfigFileError(path, "is a directory, expected a JSON file") from None
    except OSError as exc:
        raise ConfigFileError(path, f"cannot read: {exc.strerror or exc}") from None
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if not data.strip():
        raise ConfigFileError(path, "file is empty, expected a JSON object")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigFileError(
            path, f"invalid JSON: {exc.msg}", line=exc.lineno, column=exc.colno
        ) from None
    if not isinstance(value, dict):
        raise ConfigFileError(
            path, f"top-level JSON value is {_json_kind(value)}, expected an object"
        )
    return value


def strip_forbidden(value: Any, warn: Warn | None = None, path: str = "") -> Any:
    """Deep copy of ``value`` without ``__proto__`` / ``constructor`` / ``prototype`` keys.

    Applied to every layer at every depth (inside arrays too) before anything merges,
    so such keys never reach the merged tree, the model or ``raw``. Non-string keys
    (possible only in a Python mapping, never in JSON) are dropped the same way.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or key in FORBIDDEN_KEYS:
                if warn is not None:
                    warn(f"{where}: forbidden key dropped")
                continue
            out[key] = strip_forbidden(item, warn, where)
        return out
    if isinstance(value, list | tuple):
        return [strip_forbidden(item, warn, f"{path}[{i}]") for i, item in enumerate(value)]
    return copy.deepcopy(value)


def _parse_env_value(text: str) -> Any:
    """JSON if it parses (numbers, booleans, arrays, objects, quoted strings), else the text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _match_env_path(segments: Sequence[str]) -> list[str] | None:
    """Map lower-cased env segments onto the canonical key path of the engine defaults.

    Known keys are the ones in :data:`ENGINE_DEFAULTS` (including the entries of open
    objects such as ``importance.weights`` and the built-in category classes).
    """
    node: Any = ENGINE_DEFAULTS
    path: list[str] = []
    for segment in segments:
        if not isinstance(node, Mapping):
            return None
        lookup = {key.casefold(): key for key in node}
        key = lookup.get(segment.casefold())
        if key is None:
            return None
        path.append(key)
        node = node[key]
    return path or None


def env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """Collect ``ROFMD_CONFIG__SECTION__KEY[__SUBKEY...]`` variables into one layer.

    Returns ``(layer, used_names, warnings)``. The prefix and key names match
    case-insensitively; a name matching no known key is reported and ignored. Variables
    apply shallowest first, then by name, so ``ROFMD_CONFIG__RECALL='{...}'`` can be
    refined by ``ROFMD_CONFIG__RECALL__MODE`` deterministically.
    """
    matched: list[tuple[int, str, list[str], Any]] = []
    warnings: list[str] = []
    for name, text in environ.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        segments = name[len(ENV_PREFIX) :].split("__")
        path = _match_env_path(segments) if all(segments) else None
        if path is None:
            warnings.append(f"{ENV_SOURCE}: {name}: no such config key; ignored")
            continue
        matched.append((len(path), name, path, _parse_env_value(text)))
    layer: dict[str, Any] = {}
    used: list[str] = []
    for _depth, name, path, value in sorted(matched, key=lambda item: (item[0], item[1])):
        patch: Any = value
        for key in reversed(path):
            patch = {key: patch}
        layer = deep_merge(layer, patch)
        used.append(name)
    return layer, used, warnings


#: The layers of the build in progress, lowest first (pydantic-settings asks the settings
#: class for its sources, so they cannot be passed to the constructor).
_LAYERS: ContextVar[tuple[Mapping[str, Any], ...]] = ContextVar("config_layers")


class _LayerSource(PydanticBaseSettingsSource):
    """One config layer, already cleaned against the layers below it."""

    def __init__(self, settings_cls: type[BaseSettings], tree: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._tree = tree

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the stack has no fields, only whole trees

    def __call__(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self._tree))


class _LayerStack(BaseSettings):
    """The merged tree of :data:`_LAYERS`: no fields, every key kept as an extra."""

    model_config = SettingsConfigDict(extra="allow")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only our layers, highest first; the built-in sources (init, env, dotenv) stay out.
        return tuple(_LayerSource(settings_cls, tree) for tree in reversed(_LAYERS.get()))


def _stack(layers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    token = _LAYERS.set(tuple(layers))
    try:
        return dict(_LayerStack().model_extra or {})
    finally:
        _LAYERS.reset(token)


def build_config(layers: Sequence[tuple[str, Mapping[str, Any]]]) -> ConfigBuild:
    """Layer ``(source name, tree)`` pairs over the engine defaults, in order.

    Never raises for a bad *value*: every problem becomes a warning and the key keeps
    the value from below. The typed model is built from the validated tree.
    """
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
    """The full layering the daemon uses.

    Reads the packaged ``config.json``, then ``<config_dir>/config.json`` and
    ``<config_dir>/config.local.json`` (each optional), then the ``ROFMD_CONFIG__*``
    variables of ``environ``. Raises :class:`ConfigFileError` if any present file is
    unusable; the caller keeps its last good config in that case.
    """
    layers: list[tuple[str, Mapping[str, Any]]] = []
    notes: list[str] = []
    packaged = packaged_config_path()
    packaged_tree = read_config_file(packaged)
    if packaged_tree is None:
        notes.append(f"{packaged}: packaged config.json not found; using engine defaults")
    else:
        layers.append((str(packaged), packaged_tree))
    if config_dir is not None:
        for name in (USER_CONFIG_NAME, LOCAL_CONFIG_NAME):
            path = config_dir / name
            tree = read_config_file(path)
            if tree is not None:
                layers.append((str(path), tree))
    env_layer, used, env_warnings = env_overrides(environ)
    if used:
        layers.append((ENV_SOURCE, env_layer))
    build = build_config(layers)
    return replace(build, warnings=(*notes, *env_warnings, *build.warnings))
