"""`rofmd doctor` warns about config keys a user set that have no effect."""

from __future__ import annotations

from pathlib import Path

import orjson

from rofmd.cli.doctor import check_inert_keys
from rofmd.cli.inert_keys import INERT_KEYS, inert_keys_set, user_layers
from rofmd.server.settings import DaemonSettings


def settings(tmp_path: Path) -> DaemonSettings:
    return DaemonSettings(config_dir=tmp_path, socket_path=tmp_path / "s.sock")


def test_a_set_inert_key_is_named_with_its_layer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(
        orjson.dumps({"test": {"dryRun": True}, "event": {"mode": "constrain"}})
    )
    check = check_inert_keys(settings(tmp_path), {})
    assert check.ok and check.detail.startswith("warning: 1 key(s) set have no effect")
    assert "test.dryRun" in check.detail and str(tmp_path / "config.json") in check.detail
    env = {"ROFMD_CONFIG__TEST__DRYRUN": "true"}
    found = inert_keys_set(user_layers(None, env))
    assert [(src, key) for src, key, _ in found] == [("environment", "test.dryRun")]


def test_event_and_tag_keys_all_take_effect(tmp_path: Path) -> None:
    groups = {
        "event": {"mode": "index", "askUserHint": False, "similarity": {"threshold": 0.6}},
        "location": {"mode": "off", "autoMention": False, "maxLabelLength": 20},
        "person": {"mode": "index", "maxPerFolder": 3},
        "recall": {"tagMentions": {"enabled": False, "maxTagsPerKind": 2}},
    }
    (tmp_path / "config.json").write_bytes(orjson.dumps(groups))
    check = check_inert_keys(settings(tmp_path), {})
    assert check.ok and check.detail == "every key set takes effect"
    assert not [k for k in INERT_KEYS if k.split(".")[0] in ("event", "location", "person")]
    assert not [k for k in INERT_KEYS if k.startswith("recall.tagMentions")]
