"""Layering: file reading, per-field deep merge, forbidden keys, unknown keys, env overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.config import (
    ENGINE_DEFAULTS,
    ConfigBuild,
    ConfigFileError,
    build_config,
    deep_merge,
    env_overrides,
    load_config,
    packaged_config_path,
    read_config_file,
)


def write(path: Path, tree: Any) -> Path:
    path.write_bytes(orjson.dumps(tree))
    return path


# --- read_config_file -----------------------------------------------------------------


def test_missing_file_is_an_absent_layer(tmp_path: Path) -> None:
    assert read_config_file(tmp_path / "config.json") is None
    assert read_config_file(tmp_path / "no-dir" / "config.json") is None


def test_object_file_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", {"recall": {"mode": "legacy"}})
    assert read_config_file(path) == {"recall": {"mode": "legacy"}}


def test_utf8_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + '{"storage": {"dir": "记忆"}}'.encode())
    assert read_config_file(path) == {"storage": {"dir": "记忆"}}


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "recall": {\n    "mode": "fair",\n  }\n}\n')
    with pytest.raises(ConfigFileError) as info:
        read_config_file(path)
    err = info.value
    assert err.path == path
    assert (err.line, err.column) == (3, 19)  # the trailing comma
    assert str(err) == f"{path}: invalid JSON: trailing comma is not allowed at line 3, column 19"
    path.write_text('{"a": 1,\n  "b": }')
    with pytest.raises(ConfigFileError) as info:
        read_config_file(path)
    assert (info.value.line, info.value.column) == (2, 8)


def test_truncated_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"recall": {"mode": "fa')
    with pytest.raises(ConfigFileError, match="invalid JSON"):
        read_config_file(path)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1, 2]", "an array"),
        ('"x"', "a string"),
        ("42", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
    ],
)
def test_non_object_top_level_is_an_error(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(
        ConfigFileError, match=f"top-level JSON value is {kind}, expected an object"
    ):
        read_config_file(path)


def test_empty_file_and_directory_are_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(ConfigFileError, match="file is empty"):
        read_config_file(empty)
    folder = tmp_path / "dir.json"
    folder.mkdir()
    with pytest.raises(ConfigFileError, match="is a directory"):
        read_config_file(folder)


def test_invalid_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"storage": {"dir": "\xff"}}')
    with pytest.raises(ConfigFileError, match="invalid JSON"):
        read_config_file(path)


# --- deep merge and layer order -------------------------------------------------------


def test_deep_merge_objects_recurse_arrays_and_scalars_replace() -> None:
    base = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}
    over = {"a": {"c": [3], "d": {"g": 2}}, "f": {"x": 1}}
    assert deep_merge(base, over) == {"a": {"b": 1, "c": [3], "d": {"e": 1, "g": 2}}, "f": {"x": 1}}
    assert base == {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}


def test_later_layers_win_per_field() -> None:
    result = build_config(
        [
            (
                "packaged",
                {"recall": {"mode": "fair", "firstGenMax": 12, "fairness": {"thetaHigh": 0.7}}},
            ),
            ("user", {"recall": {"firstGenMax": 6, "fairness": {"rareTerm": {"scanCap": 64}}}}),
            ("local", {"recall": {"fairness": {"thetaHigh": 0.5}}}),
        ]
    )
    recall = result.config.recall
    assert recall.first_gen_max == 6  # user over packaged
    assert recall.fairness.theta_high == 0.5  # local over packaged
    assert recall.fairness.rare_term.scan_cap == 64  # user, sibling keys untouched
    assert recall.fairness.rare_term.ratio == 0.002  # engine default survives
    assert recall.hops == 0
    assert result.sources == ("engine-defaults", "packaged", "user", "local")
    assert result.warnings == ()


def test_arrays_replace_rather_than_merge() -> None:
    result = build_config(
        [
            ("user", {"recall": {"triggerSourceKinds": ["user", "agent-message"]}}),
            ("local", {"recall": {"triggerSourceKinds": ["agent-message"]}}),
        ]
    )
    assert result.config.recall.trigger_source_kinds == ("agent-message",)
    assert result.raw["recall"]["triggerSourceKinds"] == ["agent-message"]


def test_no_layers_gives_the_engine_defaults() -> None:
    result = build_config([])
    assert result.config.to_json() == ENGINE_DEFAULTS
    assert result.raw == ENGINE_DEFAULTS
    assert result.sources == ("engine-defaults",)
    assert result.warnings == ()


# --- forbidden keys -------------------------------------------------------------------

POLLUTION = ["__proto__", "constructor", "prototype"]


@pytest.mark.parametrize("key", POLLUTION)
def test_forbidden_keys_are_dropped_at_every_level(key: str) -> None:
    evil = {"polluted": True, "enabled": False}
    layer: dict[str, Any] = {
        key: evil,
        "compress": {key: evil, "triggerPercent": 70},
        "recall": {
            "fairness": {"rareTerm": {key: {"ratio": 0.9}}},
            "categoryMatch": {
                "classes": {key: {"label": "x", "words": ["y"]}, "preference": {key: 1}}
            },
        },
        "importance": {"weights": {key: 1.0}},
        "compat": {"mediaRoots": ["/srv"], "extra": [{key: 1, "ok": 2}]},
        "custom": {"nested": {key: {"x": 1}}},
    }
    result = build_config([("user", layer)])
    raw_text = orjson.dumps(result.raw).decode()
    dump_text = orjson.dumps(result.config.to_json()).decode()
    assert key not in raw_text
    assert key not in dump_text
    assert "polluted" not in raw_text
    assert result.config.enabled is True
    assert result.config.compress.trigger_percent == 70
    assert result.config.recall.fairness.rare_term.ratio == 0.002
    assert result.raw["compat"]["extra"] == [{"ok": 2}]
    assert result.raw["custom"] == {"nested": {}}
    dropped = [w for w in result.warnings if "forbidden key dropped" in w]
    assert len(dropped) == 8
    assert f"user: {key}: forbidden key dropped" in result.warnings


def test_forbidden_keys_in_env_json_values_are_dropped() -> None:
    env = {"ROFMD_CONFIG__RECALL": '{"__proto__": {"mode": "legacy"}, "hops": 1}'}
    result = load_config(None, env)
    assert result.config.recall.mode == "ranked"  # the packaged value, untouched
    assert result.config.recall.hops == 1
    assert "__proto__" not in orjson.dumps(result.raw).decode()


def test_no_model_attribute_is_reachable_through_forbidden_keys() -> None:
    result = build_config([("user", {"__class__": {"x": 1}, "constructor": {"name": "evil"}})])
    assert type(result.config).__name__ == "MemoryConfig"
    assert result.unknown == ("__class__",)


# --- unknown keys ---------------------------------------------------------------------


def test_unknown_keys_are_kept_and_ignored() -> None:
    layer = {
        "futureSection": {"a": 1},
        "recall": {"futureKnob": [1, 2], "fairness": {"newLane": {"slots": 3}}},
        "compat": {"crossChat": {"maxTokens": 10}},
    }
    result = build_config([("user", layer), ("local", {"futureSection": {"b": 2}})])
    assert result.raw["futureSection"] == {"a": 1, "b": 2}
    assert result.raw["recall"]["futureKnob"] == [1, 2]
    dumped = result.config.to_json()
    assert dumped["futureSection"] == {"a": 1, "b": 2}
    assert dumped["recall"]["fairness"]["newLane"] == {"slots": 3}
    assert dumped["compat"]["crossChat"]["maxTokens"] == 10
    assert result.config.to_json(include_unknown=False) == ENGINE_DEFAULTS
    assert result.config.recall.model_extra == {"futureKnob": [1, 2]}
    assert result.warnings == ()
    assert result.unknown == (
        "futureSection",
        "recall.futureKnob",
        "recall.fairness.newLane",
        "compat.crossChat.maxTokens",
    )


def test_raw_keeps_what_was_written_even_when_rejected() -> None:
    result = build_config([("user", {"recall": {"mode": "fast"}})])
    assert result.raw["recall"]["mode"] == "fast"
    assert result.config.recall.mode == "fair"


# --- environment overrides ------------------------------------------------------------


def test_env_overrides_parse_json_and_match_case_insensitively() -> None:
    layer, used, warnings = env_overrides(
        {
            "ROFMD_CONFIG__COMPRESS__TRIGGERPERCENT": "70",
            "rofmd_config__recall__fairness__rareterm__ratio": "0.01",
            "ROFMD_CONFIG__ENABLED": "false",
            "ROFMD_CONFIG__STORAGE__DIR": "/var/lib/mem",
            "ROFMD_CONFIG__TIME__FALLBACK": '["day3", "all"]',
            "ROFMD_CONFIG__TIMETAG__MODE": "off",
            "ROFMD_CONFIG__COMPAT__OWNERIDS": "[123]",
            "ROFMD_CONFIG_DIR": "/etc/rofmd",
            "PATH": "/usr/bin",
        }
    )
    assert warnings == []
    assert layer == {
        "enabled": False,
        "compress": {"triggerPercent": 70},
        "storage": {"dir": "/var/lib/mem"},
        "time": {"fallback": ["day3", "all"]},
        "timeTag": {"mode": "off"},
        "compat": {"ownerIds": [123]},
        "recall": {"fairness": {"rareTerm": {"ratio": 0.01}}},
    }
    assert len(used) == 7


def test_env_names_matching_no_key_are_reported_and_ignored() -> None:
    layer, used, warnings = env_overrides(
        {
            "ROFMD_CONFIG__COMPRESS__TRIGGER": "70",
            "ROFMD_CONFIG__NOPE": "1",
            "ROFMD_CONFIG__RECALL____MODE": "legacy",
            "ROFMD_CONFIG__": "x",
            "ROFMD_CONFIG__RECALL__MODE__DEEPER": "x",
        }
    )
    assert layer == {} and used == []
    assert len(warnings) == 5
    assert all(
        w.startswith("environment: ROFMD_CONFIG__") and w.endswith("ignored") for w in warnings
    )


def test_env_values_are_validated_like_any_layer() -> None:
    result = load_config(None, {"ROFMD_CONFIG__COMPRESS__TRIGGERPERCENT": "250"})
    assert result.config.compress.trigger_percent == 100
    assert any(w.startswith("environment: compress.triggerPercent") for w in result.warnings)
    result = load_config(None, {"ROFMD_CONFIG__RECALL__MODE": "legacy"})  # not JSON: a string
    assert result.config.recall.mode == "legacy"


def test_specific_env_variables_refine_a_section_object() -> None:
    env = {
        "ROFMD_CONFIG__RECALL__MODE": '"deterministic"',
        "ROFMD_CONFIG__RECALL": '{"mode": "legacy", "hops": 2}',
    }
    result = load_config(None, env)
    assert result.config.recall.mode == "deterministic"
    assert result.config.recall.hops == 2


# --- load_config ----------------------------------------------------------------------


def test_load_config_full_layering(tmp_path: Path) -> None:
    write(
        tmp_path / "config.json",
        {"recall": {"firstGenMax": 6, "mode": "legacy"}, "time": {"timezone": "UTC"}},
    )
    write(
        tmp_path / "config.local.json", {"recall": {"firstGenMax": 4}, "compat": {"ownerIds": [1]}}
    )
    env = {"ROFMD_CONFIG__RECALL__FIRSTGENMAX": "3", "ROFMD_CONFIG__ENABLED": "false"}
    result = load_config(tmp_path, env)
    cfg = result.config
    assert cfg.enabled is False  # env
    assert cfg.recall.first_gen_max == 3  # env over local over user
    assert cfg.recall.mode == "legacy"  # user
    assert cfg.compat.owner_ids == ("1",)  # local
    assert cfg.time.timezone == "UTC"  # user over packaged
    assert cfg.time.mode == "constrain"  # packaged product default
    assert cfg.event.mode == "constrain"
    assert result.sources == (
        "engine-defaults",
        str(packaged_config_path()),
        str(tmp_path / "config.json"),
        str(tmp_path / "config.local.json"),
        "environment",
    )
    assert result.warnings == ()


def test_load_config_without_config_dir_or_env_is_the_product_defaults() -> None:
    result = load_config(None, {})
    packaged = orjson.loads(packaged_config_path().read_bytes())
    assert result.config.to_json() == packaged
    assert result.sources == ("engine-defaults", str(packaged_config_path()))
    assert isinstance(result, ConfigBuild)


def test_load_config_missing_user_files_are_skipped(tmp_path: Path) -> None:
    result = load_config(tmp_path / "does-not-exist", {})
    assert len(result.sources) == 2


def test_load_config_raises_for_a_broken_user_file(tmp_path: Path) -> None:
    write(tmp_path / "config.json", {"recall": {}})
    (tmp_path / "config.local.json").write_text('{"recall": ')
    with pytest.raises(ConfigFileError) as info:
        load_config(tmp_path, {})
    assert info.value.path == tmp_path / "config.local.json"
