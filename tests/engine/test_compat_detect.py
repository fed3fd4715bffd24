"""Plugin detection (reference §3.2.1): three signals each, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

from engine.compat.detect import detect, fingerprint, profile_dir


def _profile(tmp_path: Path, manifest: object | None = None, patch: str | None = None) -> Path:
    p = tmp_path / "profile"
    p.mkdir(exist_ok=True)
    if manifest is not None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        (p / "package.json").write_text(text, encoding="utf-8")
    if patch is not None:
        (p / "cordis.patch.yml").write_text(patch, encoding="utf-8")
    return p


def test_nothing_installed(tmp_path: Path) -> None:
    found = detect(_profile(tmp_path, {"dependencies": {"left-pad": "1"}}))
    assert (found.onebot, found.derpyu, found.error) == (False, False, None)


def test_onebot_signals(tmp_path: Path) -> None:
    assert detect(_profile(tmp_path, {"dependencies": {"dsh-onebot-qq": "^0.9.6"}})).onebot
    other = tmp_path / "b"
    other.mkdir()
    assert detect(_profile(other, patch="plugins:\n  dsh-onebot-qq:\n    enabled: true\n")).onebot
    third = tmp_path / "c"
    (third / "profile" / "node_modules" / "dsh-onebot-qq").mkdir(parents=True)
    assert detect(third / "profile").onebot


def test_derpyu_signals(tmp_path: Path) -> None:
    assert detect(_profile(tmp_path, {"bundles": ["qq-mode-console"]})).derpyu
    b = tmp_path / "b"
    b.mkdir()
    assert detect(_profile(b, {"dependencies": {"@derpyu/qq-agent-presets": "1"}})).derpyu
    c = tmp_path / "c"
    c.mkdir()
    assert detect(_profile(c, patch="mcp-snowluma:\n  url: x\n")).derpyu
    d = tmp_path / "d"
    (d / "profile" / "node_modules" / "qq-agent-presets").mkdir(parents=True)
    found = detect(d / "profile")
    assert found.derpyu and not found.onebot


def test_broken_profile_detects_nothing_and_says_why(tmp_path: Path) -> None:
    found = detect(_profile(tmp_path, "{not json"))
    assert not found.onebot and not found.derpyu and found.error and "package.json" in found.error
    missing = detect(tmp_path / "nowhere")  # no DSH profile at all: nothing found, no error
    assert not missing.onebot and not missing.derpyu
    assert not missing.present and missing.error is None
    listed = detect(_profile(tmp_path, "[1]"))
    assert listed.error and "not a JSON object" in listed.error


def test_profile_chain(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert profile_dir({}, home) == home / ".dsh" / "profiles" / "desktop"
    assert profile_dir({"DSH_PROFILE": "qq"}, home) == home / ".dsh" / "profiles" / "qq"
    env = {"DSH_HOME": str(tmp_path / "dsh"), "DSH_PROFILE": "qq"}
    assert profile_dir(env, home) == tmp_path / "dsh" / "profiles" / "qq"
    env["DSH_PROFILE_DIR"] = str(tmp_path / "direct")
    assert profile_dir(env, home) == tmp_path / "direct"
    assert profile_dir(env, home, tmp_path / "setting") == tmp_path / "setting"


def test_fingerprint_follows_the_files_read(tmp_path: Path) -> None:
    p = _profile(tmp_path, {"dependencies": {}})
    before = fingerprint(p)
    (p / "package.json").write_text(json.dumps({"dependencies": {"dsh-onebot-qq": "1"}}))
    assert fingerprint(p) != before
    again = fingerprint(p)
    (p / "unrelated.txt").write_text("x")
    assert fingerprint(p) == again
