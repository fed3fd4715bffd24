"""The compat monitor (reference §3.2.1): re-detection on a profile change without a
reload, no work when nothing changed, the onebot trigger kind while active."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.compat.detect import Detection, detect
from engine.config import load_config
from handlers.compat import ONEBOT_SOURCE_KIND, CompatMonitor, with_compat

pytestmark = pytest.mark.anyio


def _profile(path: Path, deps: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "package.json").write_text(json.dumps({"dependencies": deps}), encoding="utf-8")
    return path


async def test_profile_change_redetects_and_unchanged_profile_costs_no_detection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = _profile(tmp_path / "p", {})
    cfg = load_config(None, {}).config
    seen: list[str] = []
    monitor = CompatMonitor({"DSH_PROFILE_DIR": str(profile)}, tmp_path)
    monitor.on_change = lambda status: seen.append(f"active={status.active}")

    calls = 0
    real = detect

    def counting(p: Path) -> Detection:
        nonlocal calls
        calls += 1
        return real(p)

    monkeypatch.setattr("handlers.compat.detect", counting)
    assert not (await monitor.refresh(cfg, tmp_path, 0)).active
    assert calls == 1
    await monitor.refresh(cfg, tmp_path, 0)
    assert calls == 1  # nothing changed: a stat of the probed files only
    _profile(profile, {"dsh-onebot-qq": "0.9.6"})
    status = await monitor.refresh(cfg, tmp_path, 0)
    assert status.active and status.onebot and calls == 2
    assert seen == ["active=False", "active=True"]


async def test_off_never_looks_and_on_needs_no_profile(tmp_path: Path) -> None:
    monitor = CompatMonitor({"DSH_PROFILE_DIR": str(tmp_path / "absent")}, tmp_path)
    cfg = load_config(None, {}).config
    on = cfg.model_copy(update={"compat": cfg.compat.model_copy(update={"qq_bots": "on"})})
    monitor.assume(on)
    assert monitor.status.active
    off = on.model_copy(update={"compat": on.compat.model_copy(update={"qq_bots": "off"})})
    status = await monitor.refresh(off, tmp_path, 0)
    assert not status.active and status.profile is None and status.error is None


def test_trigger_kind_only_while_onebot_compat_is_active(tmp_path: Path) -> None:
    cfg = load_config(None, {}).config
    monitor = CompatMonitor({}, tmp_path)
    monitor.assume(cfg)
    assert with_compat(cfg, monitor.status) is cfg
    on = cfg.model_copy(update={"compat": cfg.compat.model_copy(update={"qq_bots": "on"})})
    monitor.assume(on)
    kinds = with_compat(cfg, monitor.status).recall.trigger_source_kinds
    assert kinds == (*cfg.recall.trigger_source_kinds, ONEBOT_SOURCE_KIND)
    twice = with_compat(with_compat(cfg, monitor.status), monitor.status)
    assert twice.recall.trigger_source_kinds == kinds
