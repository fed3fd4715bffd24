"""storage.dir resolution and the config fingerprint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import (
    ENGINE_DEFAULTS,
    MemoryConfig,
    build_config,
    canonical_json,
    fingerprint,
    resolve_memory_root,
)

STATE = Path("/var/lib/rofmd")
HOME = Path("/home/ada")


@pytest.mark.parametrize(
    ("storage_dir", "expected"),
    [
        ("memory", STATE / "memory"),  # the default
        ("data/mem", STATE / "data/mem"),
        ("./mem", STATE / "mem"),
        ("~", HOME),
        ("~/", HOME),
        ("~/rofm/memory", HOME / "rofm" / "memory"),
        ("~\\rofm\\memory", HOME / "rofm" / "memory"),
        ("~ada/memory", STATE / "~ada/memory"),  # ~user is not expanded
        ("/srv/memory", Path("/srv/memory")),
        ("", STATE / "memory"),
        ("  ", STATE / "memory"),
    ],
)
def test_resolve_memory_root(storage_dir: str, expected: Path) -> None:
    assert resolve_memory_root(storage_dir, override=None, state_dir=STATE, home=HOME) == expected


def test_windows_absolute_path_is_used_as_is() -> None:
    result = resolve_memory_root("C:\\mem", override=None, state_dir=STATE, home=HOME)
    assert result == Path("C:\\mem")


def test_override_wins() -> None:
    override = Path("/mnt/memory-root")
    for storage_dir in ("memory", "~/x", "/abs"):
        assert (
            resolve_memory_root(storage_dir, override=override, state_dir=STATE, home=HOME)
            == override
        )


def test_default_storage_dir_lands_under_the_state_dir() -> None:
    cfg = MemoryConfig.defaults()
    root = resolve_memory_root(cfg.storage.dir, override=None, state_dir=STATE, home=HOME)
    assert root == STATE / "memory"


# --- fingerprint ----------------------------------------------------------------------


def test_fingerprint_is_a_stable_sha256() -> None:
    first = fingerprint(MemoryConfig.defaults())
    assert len(first) == 64 and int(first, 16) >= 0
    assert fingerprint(build_config([]).config) == first
    assert fingerprint(MemoryConfig.defaults()) == fingerprint(ENGINE_DEFAULTS)


def test_fingerprint_ignores_spelling_order_and_unknown_keys() -> None:
    base = fingerprint(build_config([("u", {"compress": {"triggerPercent": 70}})]).config)
    assert fingerprint(build_config([("u", {"compress": {"triggerPercent": 70.0}})]).config) == base
    with_unknown = build_config([("u", {"compress": {"triggerPercent": 70}, "future": {"x": 1}})])
    assert fingerprint(with_unknown.config) == base
    assert canonical_json({"b": 1, "a": 2.0}) == b'{"a":2,"b":1}'


def test_fingerprint_changes_with_any_effective_value() -> None:
    base = fingerprint(MemoryConfig.defaults())
    changes: list[dict[str, Any]] = [
        {"recall": {"mode": "legacy"}},
        {"recall": {"fairness": {"rareTerm": {"ratio": 0.003}}}},
        {"recall": {"categoryMatch": {"classes": {"taboo": {"words": ["禁忌"]}}}}},
        {"enabled": False},
    ]
    seen = {base}
    for change in changes:
        value = fingerprint(build_config([("u", change)]).config)
        assert value not in seen
        seen.add(value)
