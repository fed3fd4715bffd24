"""A pre-step does only the work its answer needs, and answers what it always answered.

* below the trigger, with no unreported archive to recognise, nothing reads the surface
  (no surface ids, no plan, no image files) and no worker thread is used for it;
* an archive checks image files only when it archives images (then every image check
  the plan consults is made, as before);
* the task block is rendered again only when something it shows changed: the same
  block, byte for byte, as a fresh render at every moment (waiting times cross minutes,
  hours and days), after a folder is scored, and for each session on its own;
* an archive's answer lists the new folders with the texts read back from disk would
  give, computed while the folders were being made durable;
* after a compaction (the same window, fewer tokens) the next pre-steps show the block
  the archive's answer rendered, without a worker hop.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import handlers.pre_step as pre_step_module
import handlers.tasks_section as tasks_module
from engine.scoring.eras import LEGACY_BOUNDARY_MS
from engine.scoring.readable import readable_text
from engine.scoring.task_block import render_task_block
from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext
from handlers.pre_step import ArchiveCommitParams, PreStepParams, archive_commit, pre_step
from handlers.scoring_policy import listed_pending
from handlers.tasks_section import build_task_block, tasks_section_text
from tests.archive_fixtures import Surface, pre_step_params
from tests.engine.test_store_crash import FaultyFs, using
from tests.handlers.app_fixtures import count_hops

CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}
NOW = LEGACY_BOUNDARY_MS + 30 * 86_400_000  # folders of the current era: listed


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


@pytest.fixture(autouse=True)
def _no_fsync() -> Iterator[None]:
    with using(FaultyFs()):
        yield


def make_app(root: Path) -> App:
    (root / "cfg").mkdir(parents=True, exist_ok=True)
    return App(
        ConfigState.start(root / "cfg", {}),
        Paths(memory_root_override=root / "mem", state_dir=root / "state", home=root),
        _Info(),
    )


def ctx(sid: str, now: int = NOW, method: str = "agent/pre-step") -> RequestContext:
    conn = ConnectionState(conn_id=1, initialized=True, capabilities=dict(CAPS))
    return RequestContext("r", method, sid, conn, now_ms=now)


def surface(images: list[Path] | None = None) -> Surface:
    s = Surface()
    s.system()
    atts = [
        {"attachmentId": f"a{i}", "mediaType": "image/png", "hostPath": str(p)}
        for i, p in enumerate(images or [])
    ]
    s.user("先看图", images=atts)
    for i in range(40):
        s.turn_pair(i, 300)
    return s


def params(s: Surface, sid: str, percent: float) -> PreStepParams:
    return PreStepParams.model_validate(pre_step_params(s, session=sid, percent=percent))


async def archive(app: App, s: Surface, sid: str) -> dict[str, Any]:
    answer = await pre_step(app, params(s, sid, 80), ctx(sid))
    comp = answer["compaction"]
    assert comp is not None and len(comp["folders"]) > 1
    commit = ArchiveCommitParams.model_validate({"session": {"id": sid}, "token": comp["token"]})
    await archive_commit(app, commit, ctx(sid, method="archive/commit"))
    return answer


async def test_below_the_trigger_nothing_reads_the_surface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(tmp_path)
    s = surface()
    await archive(app, s, "quiet")  # folders waiting, the archive committed

    def untouched(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("read the surface below the trigger")

    for name in ("surface_ids", "plan_pre_step", "_readable_images"):
        monkeypatch.setattr(pre_step_module, name, untouched)
    answer = await pre_step(app, params(s, "quiet", 50), ctx("quiet"))
    assert answer["compaction"] is None and answer["warnings"] == []
    tasks = next(x["text"] for x in answer["sections"] if x["name"] == "dsh-rofm:memory-tasks")
    assert tasks  # the waiting folders are listed as ever


async def test_image_files_are_checked_only_when_images_are_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[int] = []
    real = pre_step_module._readable_images

    def counting(surface: list[dict[str, Any]]) -> dict[str, str]:
        checked.append(len(surface))
        return real(surface)

    monkeypatch.setattr(pre_step_module, "_readable_images", counting)
    app = make_app(tmp_path)
    await archive(app, surface(), "plain")
    assert checked == []
    img = tmp_path / "shot.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    answer = await archive(app, surface([img]), "pictured")
    assert len(checked) == 1
    state = await app.sessions.get("pictured")
    (copied,) = state.store.image_entries()
    assert copied.folderId in answer["compaction"]["folders"]
    assert state.store.image_path(copied.name).read_bytes() == img.read_bytes()


async def test_the_task_block_is_the_fresh_render_at_every_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders: list[int] = []
    real = render_task_block

    def counting(inp: Any) -> Any:
        renders.append(1)
        return real(inp)

    monkeypatch.setattr(tasks_module, "render_task_block", counting)
    app = make_app(tmp_path)
    s = surface()
    for sid in ("one", "two"):
        await archive(app, s, sid)
    one, two = await app.sessions.get("one"), await app.sessions.get("two")
    cfg = app.config.config
    minute, hour, day = 60_000, 3_600_000, 86_400_000
    moments = [0, 1, 30_000, minute - 1, minute, minute + 1, 59 * minute, hour, 2 * hour + 5]
    moments += [day - 1, day, 3 * day, 3 * day]
    builds = 0
    for k, dt in enumerate(moments):
        if k == 8:  # a folder is scored: the list changes
            first = listed_pending(one, cfg)[0]
            one.store.update_metas({first: {"scored": True, "alpha": 0.5, "beta": 1.0}})
        for state in (one, two, one):
            block = build_task_block(state, cfg, NOW + dt, has_recall_block=False)
            builds += 1
            tasks_module._LAST_RENDER.clear()
            fresh = build_task_block(state, cfg, NOW + dt, has_recall_block=False)
            assert block == fresh, (state.key, dt)
    misses = len(renders) - builds  # every fresh build renders
    assert 0 < misses < builds  # some answers reused their block, changes never did


async def test_an_archives_block_reads_the_new_folders_as_they_are_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their texts are computed while the folders are being made durable (each one staged,
    none published yet), and are what reading each folder back gives: the block is the
    block a cold cache renders."""
    staged_then: list[int] = []
    real = readable_text

    def watching(messages: Any) -> Any:
        staged_then.append(len(list((tmp_path / "mem").rglob(".staging-*"))))
        return real(messages)

    monkeypatch.setattr(pre_step_module, "readable_text", watching)
    app = make_app(tmp_path)
    answer = await archive(app, surface(), "seeded")
    folders = answer["compaction"]["folders"]
    # each text right after its folder was staged, before the next one and any publishing
    assert staged_then == list(range(1, len(folders) + 1))
    state = await app.sessions.get("seeded")
    for fid in folders:
        assert state.scoring_texts[fid] == readable_text(state.store.read_context(fid))
    block = next(x["text"] for x in answer["sections"] if x["name"] == "dsh-rofm:memory-tasks")
    assert all(fid in block for fid in folders)
    state.scoring_texts.clear()
    tasks_module._LAST_RENDER.clear()
    assert await tasks_section_text(app, state, ctx("seeded")) == block


async def test_a_sessions_remembered_block_goes_with_the_session(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    await archive(app, surface(), "gone")
    state = await app.sessions.get("gone")
    sid = id(state)
    assert sid in tasks_module._LAST_RENDER
    del state
    assert app.sessions.dispose("gone")
    gc.collect()  # a session may sit in a reference cycle: gone once collected
    assert sid not in tasks_module._LAST_RENDER


async def test_after_a_compaction_the_next_steps_take_the_archives_block_without_a_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's window is unchanged after a compaction (only its tokens fell): the
    block the archive's answer rendered is what the next pre-steps show, with no worker
    hop, until something it reads changes."""
    app = make_app(tmp_path)
    s = surface()
    first = await archive(app, s, "compacted")
    raw = pre_step_params(s, session="compacted", percent=80)
    raw["context"]["totalTokens"] //= 2  # what the compaction left (below the trigger)
    after = PreStepParams.model_validate(raw)
    hops = count_hops(monkeypatch)

    def tasks(answer: dict[str, Any]) -> str:
        return str(
            next(x["text"] for x in answer["sections"] if x["name"] == "dsh-rofm:memory-tasks")
        )

    for step in range(2):
        answer = await pre_step(app, after, ctx("compacted", NOW + step))
        assert answer["compaction"] is None and tasks(answer) == tasks(first)
    assert hops == []
