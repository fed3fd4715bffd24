"""Suppressed and deleted memories (issue 19) in the engine: the candidate index every
recall path (keywords, categories, ranked fallback, hops) is built from leaves suppressed
folders out; the state survives a reload and a damaged file is kept aside; a delete
interrupted at any step is finished by recovery, never half done."""

from __future__ import annotations

import shutil
from pathlib import Path

from engine.config import build_config
from engine.recall import CandidateIndex
from engine.recall.fair import Pick
from engine.recall.forget import delete_folders, parse_forget_arguments, remove_from_block
from engine.recall.hops import expand_hops
from engine.recall.hygiene import HYGIENE_FILE, Hygiene, visible_entries
from engine.recall.query import analyze_query
from engine.recall.state import Addition, RecallState
from engine.store import FolderMeta, SessionStore, make_idempotency_key, open_session
from tests.engine.test_store_crash import FaultyFs, Injected, using

NOW = 1_767_225_600_000


def store_with(root: Path, keywords: list[list[str]]) -> tuple[SessionStore, list[str]]:
    store = open_session(root, "s1")
    ids = []
    with store.transaction("arc-1", keep_record=False) as txn:
        for n, kws in enumerate(keywords):
            meta = FolderMeta.model_validate(
                {
                    "id": store.new_folder_id(NOW + n),
                    "createdAt": NOW + n,
                    "scored": True,
                    "alpha": 0.5,
                    "keywords": kws,
                    "title": f"t{n}",
                    "idempotencyKey": make_idempotency_key("s1", 1, n, n, "h", n),
                    "images": [{"name": f"img-{n}.png"}],
                }
            )
            txn.add_folder(
                meta, [{"role": "user", "content": " ".join(kws)}], [(f"img-{n}.png", b"\x89PNG")]
            )
            ids.append(meta.id)
    return store, ids


def test_suppressed_folders_are_never_candidates_nor_hops(tmp_path: Path) -> None:
    store, ids = store_with(tmp_path, [["星港", "网关"], ["网关", "灰度"], ["灰度", "端口"]])
    cfg = build_config([("t", {"recall": {"hops": 2}})]).config
    hygiene = Hygiene()
    assert visible_entries(store.index, hygiene.hidden()) is store.index
    hygiene.suppress([ids[1]], NOW)
    index = CandidateIndex(visible_entries(store.index, hygiene.hidden()), cfg)
    assert ids[1] not in index.by_id
    found = index.match(analyze_query("网关 灰度", cfg)).candidates
    assert {index.folders[n].id for n in found} == {ids[0], ids[2]}
    hops = expand_hops(index, [Pick(index.by_id[ids[0]], ids[0], "x")], {ids[0]}, cfg, 5)
    assert ids[1] not in [p.id for p in hops]
    # updating the cached index in place gives the same exclusion
    full = CandidateIndex(store.index, cfg)
    assert full.update(visible_entries(store.index, hygiene.hidden()), cfg, max_changes=1.0)
    assert ids[1] not in full.by_id


def test_state_round_trips_and_a_damaged_file_is_kept_aside(tmp_path: Path) -> None:
    path = tmp_path / HYGIENE_FILE
    h = Hygiene.load(path)
    assert h.suppress(["mem-a", "mem-a", "mem-b"], NOW) == ["mem-a", "mem-b"]
    assert h.pause(NOW + 1) and not h.pause(NOW + 2)
    h.save()
    back = Hygiene.load(path)
    assert back.hidden() == {"mem-a", "mem-b"} and back.paused_at == NOW + 1
    assert back.resume() and not back.resume()
    path.write_text("{not json")
    damaged = Hygiene.load(path)
    assert damaged.hidden() == frozenset() and damaged.discarded is not None
    assert list(tmp_path.glob(f"{HYGIENE_FILE}.corrupt-*")) and not path.exists()


def test_arguments_and_block_removal() -> None:
    call = parse_forget_arguments({"recalled": [2, 2], "ids": "mem-x", "action": "delete"})
    assert call.recalled == (2,) and call.ids == ("mem-x",) and not call.problems
    bad = parse_forget_arguments({"recalled": [0], "action": "burn", "keywords": 3})
    assert len(bad.problems) == 3
    assert parse_forget_arguments({"keywords": "地址"}).preview
    rs = RecallState(additions=[Addition("mem-1", 0.5, 0, NOW), Addition("mem-2", 0.5, 0, NOW)])
    rs.ledger["mem-1"] = [1.0, 0.5]
    rs.render()
    assert remove_from_block(rs, ["mem-1"], forget=True) == 1
    assert rs.ids() == ["mem-2"] and "mem-1" not in rs.ledger and rs.block


def test_delete_interrupted_anywhere_is_finished_by_recovery(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    _, ids = store_with(pristine, [["a1"], ["b2"], ["c3"]])
    completed = False
    for fail_at in range(60):
        root = tmp_path / f"r{fail_at}"
        shutil.copytree(pristine, root)
        store = open_session(root, "s1")
        try:
            with using(FaultyFs(fail_at, "crash")):
                delete_folders(store, ids[:2], "forget-1")
            completed = True
        except Injected:
            pass
        reopened = open_session(root, "s1")
        left = [e.id for e in reopened.index]
        on_disk = sorted(p.name for p in reopened.dir.iterdir() if p.name.startswith("mem-"))
        assert left == on_disk
        assert left in (ids, [ids[2]]), (fail_at, left)
        images = sorted(p.name for p in reopened.paths.images_dir.glob("img-*"))
        assert images == sorted(f"img-{ids.index(f)}.png" for f in left)
        assert not list(reopened.dir.glob(".commit-*"))
        shutil.rmtree(root)
        if completed:
            assert left == [ids[2]]
            break
    assert completed
