"""Config keys that are validated and accepted but change nothing (yet).

Why a table: a user who sets such a key gets no effect and, without this, no word
about it (issue 12). `rofmd doctor` reads the user's own layers (the config directory's
`config.json` and `config.local.json`, the `ROFMD_CONFIG__*` variables; not the packaged
defaults, which set every key) and warns about each key of this table they set. A row
leaves the table in the change that makes its key take effect.

Each feature keeps its rows here, one dotted camelCase path per row with the reason a
person reads. The event / location / person / `recall.tagMentions` groups have none: every
key of theirs is read where the reference uses it (recall constraints, automatic tag
mentions, memory_judge, the task block). Of the time / timeTag groups, only the two keys
the reference itself fixes: every other is read by archiving (event time, time tags),
memory_recall's time windows and time index, and the recall block's dates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.config import env_overrides, read_config_file
from engine.config.layers import ENV_SOURCE, LOCAL_CONFIG_NAME, USER_CONFIG_NAME

__all__ = ["INERT_KEYS", "inert_keys_set", "user_layers"]

INERT_KEYS: dict[str, str] = {
    "test.dryRun": "a reserved field: the reference gives it no behaviour in this version",
    "time.centerDayPriority": "a reserved switch: a one-day query always tries the centre day"
    " first, then ±1 day (the reference fixes the behaviour)",
    "time.judgeEventTime": "fixed to false: event time comes only from message times, never"
    " from memory_judge",
}
"""dotted key -> why setting it has no effect."""


def user_layers(
    config_dir: Path | None, environ: Mapping[str, str]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The layers a user wrote: their config files (when present), then the environment.
    Raises `engine.config.ConfigFileError` for an unusable file, as loading does."""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if config_dir is not None:
        for name in (USER_CONFIG_NAME, LOCAL_CONFIG_NAME):
            path = config_dir / name
            tree = read_config_file(path)
            if tree is not None:
                layers.append((str(path), tree))
    env_layer, used, _ = env_overrides(environ)
    if used:
        layers.append((ENV_SOURCE, env_layer))
    return layers


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, Mapping):
            yield from _leaves(value, path + ".")


def inert_keys_set(
    layers: list[tuple[str, Mapping[str, Any]]],
    table: Mapping[str, str] = INERT_KEYS,
) -> list[tuple[str, str, str]]:
    """(layer, key, why) for each key of `table` a layer sets, in layer order."""
    out: list[tuple[str, str, str]] = []
    for source, tree in layers:
        for path in _leaves(tree):
            if path in table:
                out.append((source, path, table[path]))
    return out
