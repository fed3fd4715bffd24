"""`rofmd selfcheck`: the reference's independent health check (§7 "自检工具"), as it
applies to this daemon.

Each check prints `[PASS]/[WARN]/[FAIL] <check> — <detail>`, then the summary line
`selfcheck: X passed, Y warnings, Z failed`; `--json` prints one document instead
(`tool`, `version`, `generatedAt`, `durationMs`, `checks[]`, `summary`). Exit 1 when a
check FAILs (a WARN does not change the exit code), 2 for bad usage.

Checks: config, engine (archive and recall smoke on a temporary store), memory store
(index ↔ disk both ways, every `meta.json`, index ↔ meta field by field, folder ids,
images, `stats.jsonl`), recall state, pending era, time index, recall fairness, event
tags, session logs.

Read-only: it writes nothing under the memory root or the sessions directory. Stores are
read without recovery (`engine.store.readonly`), logs with the streaming reader; the
engine smoke runs in a temporary directory it removes. What recovery would repair at the
next open is reported (WARN), not done.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.config import (
    ENGINE_DEFAULTS,
    ConfigFileError,
    MemoryConfig,
    build_config,
    load_config,
    packaged_config_path,
    read_config_file,
    resolve_memory_root,
)
from engine.jsonio import CorruptJSONError
from engine.recall.state import committed_document
from engine.scoring.era_audit import era_totals, pending_verdict, store_eras
from engine.store import FolderMeta, IndexEntry, is_folder_id, read_jsonl
from engine.store.readonly import ReadonlyStore, iter_metas, read_image_table
from engine.timeexpr.civil import valid_ms
from rofmd.cli.json_out import print_json
from rofmd.cli.store_views import add_store_options, guarded, now_ms, read_listed
from rofmd.cli.where import UsageError, Where, daemon_settings

__all__ = ["Check", "add_selfcheck_parser", "run_selfcheck"]

Status = Literal["PASS", "WARN", "FAIL"]

RECONCILED_FIELDS = (
    "alpha",
    "beta",
    "createdAt",
    "scored",
    "rescorePending",
    "keywords",
    "title",
    "eventTimeSource",
)
"""What the reference's v1.4.1 check compares between an index row and its meta (recall
reads the index: a stale row is a wrong answer, not a cosmetic one)."""

SHOWN = 5
"""Folders named per problem (the JSON document has them all)."""


@dataclass
class Check:
    """One line of the report."""

    name: str
    status: Status
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, **self.data}

    def line(self) -> str:
        return f"[{self.status}] {self.name} — {self.detail}"


def _worst(*statuses: Status) -> Status:
    if "FAIL" in statuses:
        return "FAIL"
    return "WARN" if "WARN" in statuses else "PASS"


def _names(ids: Sequence[str], n: int = SHOWN) -> str:
    more = f" and {len(ids) - n} more" if len(ids) > n else ""
    return ", ".join(ids[:n]) + more


# ---- where and what ---------------------------------------------------------------


@dataclass
class Setup:
    """The config, where the stores are, and the config check's verdict."""

    cfg: MemoryConfig
    where: Where
    sessions_dir: Path
    config: Check


def _setup(args: argparse.Namespace, environ: Mapping[str, str]) -> Setup:
    settings = daemon_settings(args, ("config_dir", "memory_root", "sessions_dir"), UsageError)
    try:
        build = load_config(settings.config_dir, environ)
    except ConfigFileError as exc:
        packaged = read_config_file(packaged_config_path())
        cfg = build_config([("packaged", packaged)] if packaged else []).config
        check = Check(
            "config",
            "FAIL",
            f"{exc}; the checks below use the packaged defaults",
            {"error": str(exc)},
        )
    else:
        cfg = build.config
        facts = (
            f"compress.maxFoldersPerRun={cfg.compress.max_folders_per_run}, "
            f"storage.maxFolders={cfg.storage.max_folders}"
        )
        problems = []
        if cfg.storage.max_folders <= 0:
            problems.append("storage.maxFolders must be positive")
        if cfg.compress.max_folders_per_run <= 0:
            problems.append("compress.maxFoldersPerRun must be positive")
        sources = ", ".join(build.sources) or "engine defaults"
        data = {"sources": list(build.sources), "warnings": list(build.warnings)}
        if problems:
            check = Check("config", "FAIL", "; ".join(problems) + f" ({facts})", data)
        elif build.warnings:
            shown = "; ".join(build.warnings[:3]) + (" …" if len(build.warnings) > 3 else "")
            check = Check(
                "config",
                "WARN",
                f"valid with {len(build.warnings)} value(s) fallen back: {shown}; {facts}",
                data,
            )
        else:
            check = Check("config", "PASS", f"valid ({sources}); {facts}", data)
    root = resolve_memory_root(
        cfg.storage.dir,
        override=settings.memory_root,
        state_dir=settings.state_dir,
        home=Path(environ.get("HOME") or Path.home()),
    ).expanduser()
    return Setup(cfg, Where(cfg, root), settings.sessions_dir, check)


# ---- engine -----------------------------------------------------------------------

_SMOKE_TOPICS = ("星港", "蓝鲸", "青柠", "白桦", "赤狐", "金橘", "银杏", "紫藤", "黑曜", "翠竹")
_SMOKE_REPEATED = (3, 4)  # turns whose user text is the same: their titles must differ


def _smoke_messages() -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for i, topic in enumerate(_SMOKE_TOPICS):
        head = (
            "请记住同一个问题。"
            if i in _SMOKE_REPEATED
            else f"{topic}项目的部署端口是 {8000 + i}。"
        )
        pad = "".join(f"第{k}条补充说明：这一段只是填充文字。" for k in range(40))
        msgs.append({"role": "user", "content": head + pad})
        msgs.append({"role": "assistant", "content": f"好的，{topic}项目端口 {8000 + i} 已记下。"})
    return msgs


def check_engine(at_ms: int) -> Check:
    """Engine defaults, then one archive and one recall on a temporary store."""
    from engine.archive.standalone import archive_conversation
    from engine.recall.standalone import StandaloneRecall, recall_once
    from engine.store import open_session
    from rofmd.cli.engine_cli import archiver_version

    default_cap = ENGINE_DEFAULTS["compress"]["maxFoldersPerRun"]
    if default_cap != 500:
        return Check("engine", "FAIL", f"engine default compress.maxFoldersPerRun={default_cap}")
    cfg = build_config([]).config
    tmp = Path(tempfile.mkdtemp(prefix="rofmd-selfcheck-"))
    try:
        store = open_session(tmp, "selfcheck-smoke")
        result = archive_conversation(
            store,
            _smoke_messages(),
            used_percent=90,
            window=128_000,
            now_ms=at_ms,
            cfg=cfg,
            archiver_version=archiver_version(),
            start_ms=at_ms - 3_600_000,
        )
        if not result.archived or result.commit is None:
            return Check(
                "engine", "FAIL", f"archive smoke archived nothing ({result.plan.outcome})"
            )
        ids = list(result.commit.folder_ids)
        titles = [store.get_entry(f).title for f in ids]
        cap = cfg.compress.max_folders_per_run
        problems = []
        if len(ids) > cap:
            problems.append(f"{len(ids)} folders over the cap of {cap}")
        if len(set(titles)) != len(titles):
            problems.append(f"titles repeat within one archive: {titles}")
        target = next((f for f, t in zip(ids, titles, strict=True) if "蓝鲸" in t), None)
        outcome = recall_once(
            StandaloneRecall.open(store, cfg),
            "蓝鲸项目的部署端口是多少？",
            now_ms=at_ms + 1000,
            context_window=128_000,
        )
        if target is None or target not in outcome.recalled:
            problems.append(f"recall smoke did not bring back the matching folder {target}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    detail = (
        f"compress.maxFoldersPerRun default 500; archive smoke: {len(ids)} folder(s) "
        f"(cap {cap}) with unique titles; recall smoke: {len(outcome.recalled)} recalled, "
        "the matching folder among them"
    )
    if problems:
        return Check("engine", "FAIL", "; ".join(problems))
    return Check("engine", "PASS", detail)


# ---- memory store -----------------------------------------------------------------


def _meta_problems(meta: FolderMeta) -> list[str]:
    out = []
    if not valid_ms(meta.createdAt):
        out.append(f"createdAt {meta.createdAt} is not a time")
    if not 0 <= meta.alpha <= 1:
        out.append(f"α {meta.alpha} outside [0, 1]")
    if meta.scored and meta.alphaSource == "llm" and meta.alpha < 0.01:
        out.append(f"judged α {meta.alpha} below 0.01")
    if not -10 <= meta.beta <= 10:
        out.append(f"β {meta.beta} outside [-10, 10]")
    n = len(meta.keywords)
    if n > 16:
        out.append(f"{n} keywords (at most 16)")
    if meta.scored and meta.keywordsSource == "llm" and n < 3:
        out.append(f"{n} judged keyword(s) (at least 3)")
    return out


def _differences(entry: IndexEntry, meta: FolderMeta) -> list[str]:
    out = []
    for name in RECONCILED_FIELDS:
        a, b = getattr(entry, name), getattr(meta, name)
        if a != b:
            out.append(f"{name} index {a!r} ≠ meta {b!r}")
    return out


@dataclass
class StatsFile:
    lines: int = 0
    bad: list[int] = field(default_factory=list)
    torn: bool = False


def _stats_file(path: Path) -> StatsFile:
    import orjson

    out = StatsFile()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    lines = data.split(b"\n")
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        out.lines += 1
        try:
            ok = isinstance(orjson.loads(line), dict)
        except orjson.JSONDecodeError:
            ok = False
        if not ok:
            if n == len(lines):  # no line end after it: a write cut short
                out.torn = True
            else:
                out.bad.append(n)
    return out


@dataclass
class StoreFindings:
    """Problems of one store, by kind."""

    fail: list[str] = field(default_factory=list)
    warn: list[str] = field(default_factory=list)
    pending: int = 0
    scored: int = 0
    stats_lines: int = 0
    images: int = 0


def _check_one_store(store: ReadonlyStore) -> StoreFindings:
    out = StoreFindings()
    where = store.session_id
    if store.index_status == "corrupt":
        out.fail.append(f"{where}: index.json is not a readable index")
    elif store.index_status == "missing" and store.folder_dirs:
        out.fail.append(f"{where}: index.json missing with {len(store.folder_dirs)} folder(s)")
    for bad in store.bad_rows:
        out.fail.append(f"{where}: index row {bad.folder_id or '?'}: {bad.reason}")
    busy = store.journal_folders()
    metas: dict[str, FolderMeta] = {}
    for fid, meta in iter_metas(store):
        if isinstance(meta, FolderMeta):
            metas[fid] = meta
            for p in _meta_problems(meta):
                out.fail.append(f"{where}/{fid}: meta.json {p}")
        elif fid not in busy:
            out.fail.append(f"{where}/{fid}: {meta.reason}")
    keys = {e.idempotencyKey for e in store.index if e.idempotencyKey}
    for fid in store.orphans():
        if fid in busy:
            continue
        meta_of = metas.get(fid)
        if meta_of is not None and meta_of.idempotencyKey in keys:
            out.warn.append(f"{where}/{fid}: a duplicate of an indexed folder's span (kept aside)")
        elif meta_of is not None:
            out.fail.append(f"{where}/{fid}: on disk but not in index.json")
    for fid in store.missing():
        if fid not in busy:
            out.fail.append(f"{where}/{fid}: in index.json but its folder is gone")
    for entry in store.index:
        out.pending += entry.scored is False
        out.scored += entry.scored is not False
        meta_e = metas.get(entry.id)
        if meta_e is None:
            continue
        diff = _differences(entry, meta_e)
        if diff:
            out.fail.append(
                f"{where}/{entry.id}: index.json disagrees with meta.json: " + "; ".join(diff)
            )
    for fid, written in store.log_conflicts.items():
        meta_c = metas.get(fid)
        diff = _differences(written, meta_c) if meta_c is not None else []
        if diff:
            out.fail.append(
                f"{where}/{fid}: index.json disagrees with meta.json (index.json was changed"
                " behind index.log.jsonl; the next open re-reads the row from the meta): "
                + "; ".join(diff)
            )
        else:
            out.warn.append(f"{where}/{fid}: index.json was changed behind index.log.jsonl")
    reread = [f for f in store.log_reread if f not in store.log_conflicts]
    if reread:
        out.warn.append(
            f"{where}: {len(reread)} row(s) of index.log.jsonl differ from their meta"
            f" (re-read at the next open): {_names(reread)}"
        )
    for fid, reason in store.log_unreadable:
        out.fail.append(f"{where}/{fid}: {reason}")
    if store.log_skipped:
        out.warn.append(f"{where}: {store.log_skipped} unreadable line(s) in index.log.jsonl")
    leftovers = [*store.journals, *store.staging, *store.temp_files]
    if leftovers:
        out.warn.append(
            f"{where}: {len(leftovers)} unfinished write(s) (an archive under way, or settled at"
            f" the next open): {_names(leftovers)}"
        )
    # images: what metas name, and what the table names, must exist
    on_disk = _image_files(store)
    for fid, meta in metas.items():
        for ref in meta.images or ():
            out.images += 1
            if ref.name not in on_disk:
                out.fail.append(f"{where}/{fid}: image {ref.name} is missing from images/")
    table = read_image_table(store.paths)
    if table.status == "corrupt":
        out.warn.append(f"{where}: images/index.json unreadable (rebuilt from the metas on use)")
    for row in table.entries:
        if row.name not in on_disk:
            out.fail.append(f"{where}: images/index.json names {row.name}, which is missing")
    if table.invalid:
        out.warn.append(f"{where}: {table.invalid} invalid row(s) in images/index.json")
    stats = _stats_file(store.paths.stats)
    out.stats_lines = stats.lines
    if stats.bad:
        out.fail.append(
            f"{where}: stats.jsonl line(s) {_names([str(n) for n in stats.bad])} not JSON objects"
        )
    if stats.torn:
        out.warn.append(f"{where}: stats.jsonl ends in a torn line (a write cut short)")
    return out


def _image_files(store: ReadonlyStore) -> frozenset[str]:
    from engine.store.images import image_files

    return image_files(store.paths)


def check_store(stores: Sequence[ReadonlyStore]) -> Check:
    fail: list[str] = []
    warn: list[str] = []
    pending = scored = lines = images = 0
    folders = sum(len(s.folder_dirs) for s in stores)
    entries = sum(len(s) for s in stores)
    for store in stores:
        f = _check_one_store(store)
        fail += f.fail
        warn += f.warn
        pending += f.pending
        scored += f.scored
        lines += f.stats_lines
        images += f.images
    facts = (
        f"{len(stores)} store(s), {folders} folder(s), {entries} index entr(y/ies); {pending}"
        f" pending (unscored), {scored} scored; {lines} stats line(s), {images} archived image(s)"
    )
    data = {
        "stores": len(stores),
        "folders": folders,
        "entries": entries,
        "problems": fail,
        "warnings": warn,
    }
    if fail:
        return Check(
            "memory store",
            "FAIL",
            f"{len(fail)} problem(s): {'; '.join(fail[:SHOWN])}; {facts}",
            data,
        )
    if warn:
        return Check("memory store", "WARN", f"{'; '.join(warn[:SHOWN])}; {facts}", data)
    return Check(
        "memory store", "PASS", f"index and disk agree; meta/keywords/stats valid; {facts}", data
    )


# ---- recall state -----------------------------------------------------------------


def _finite(v: Any) -> bool:
    import math

    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _state_problems(doc: Any) -> list[str]:
    if isinstance(doc, list):
        doc = {"version": 1, "ids": doc}
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    out = []
    version = doc.get("version", 1)
    if version not in (1, 2, 3):
        out.append(f"version {version!r}")
    ids = doc.get("ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return [*out, "ids is not a list of folder ids"]
    out += [f"unsafe id {i!r}" for i in ids if not is_folder_id(i)]
    adds = doc.get("additions")
    if version >= 2:
        if not isinstance(adds, list):
            return [*out, "additions is not a list"]
        add_ids = [a.get("id") for a in adds if isinstance(a, dict)]
        if add_ids != ids:
            out.append("ids and additions differ")
        for a in adds:
            if not isinstance(a, dict):
                out.append("an addition is not an object")
                continue
            for key in ("alpha", "beta", "createdAt", "generation", "chars"):
                if key in a and not _finite(a[key]):
                    out.append(f"{a.get('id')}: {key} {a[key]!r} not a finite number")
            beta = a.get("beta")
            if isinstance(beta, int | float) and _finite(beta) and not -10 <= beta <= 10:
                out.append(f"{a.get('id')}: β {beta} outside [-10, 10]")
        if not isinstance(doc.get("block", ""), str):
            out.append("block is not text")
    return out


def check_recall_state(stores: Sequence[ReadonlyStore]) -> Check:
    files = 0
    versions: Counter[str] = Counter()
    fail: list[str] = []
    for store in stores:
        path = store.paths.recall_state
        try:
            doc = committed_document(path)  # with its log: what a load reads
        except FileNotFoundError:
            continue
        except CorruptJSONError as exc:
            fail.append(f"{store.session_id}: not JSON ({exc.reason})")
            continue
        files += 1
        version = doc.get("version", 1) if isinstance(doc, dict) else 1
        versions[f"v{version}"] += 1
        fail += [f"{store.session_id}: {p}" for p in _state_problems(doc)]
    shown = ", ".join(f"{v}={n}" for v, n in sorted(versions.items())) or "none"
    if fail:
        return Check("recall state", "FAIL", "; ".join(fail[:SHOWN]), {"problems": fail})
    return Check("recall state", "PASS", f"{files} recall-state.json file(s) valid ({shown})")


# ---- pending era --------------------------------------------------------------------


def check_pending_era(
    stores: Sequence[ReadonlyStore], records: Mapping[str, list[dict[str, Any]]]
) -> Check:
    eras = [store_eras(s.session_id, s.index, records[s.session_id]) for s in stores]
    totals = era_totals(eras)
    status, detail = pending_verdict(totals)
    return Check("pending era", status, detail, {"eras": totals.to_json()})


# ---- time index ---------------------------------------------------------------------

TIME_WINDOWS_CHECKED = 50


def _tag_problems(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        return ["timeTags is not a list"]
    out = []
    for n, tag in enumerate(raw):
        if not isinstance(tag, dict):
            out.append(f"tag {n} is not an object")
            continue
        a, b = tag.get("from"), tag.get("to")
        if not (valid_ms(a) and valid_ms(b) and b > a):
            out.append(f"tag {n} window {a!r}..{b!r} is not a time window")
        if not isinstance(tag.get("label"), str):
            out.append(f"tag {n} has no label")
    return out


def check_time(stores: Sequence[ReadonlyStore], cfg: MemoryConfig) -> Check:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from engine.timeexpr.index import TimeIndex, folder_time

    fail: list[str] = []
    warn: list[str] = []
    tz_name = cfg.time.timezone
    if tz_name:
        try:
            ZoneInfo(tz_name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            warn.append(f"time.timezone {tz_name!r} is not a known zone (UTC is used)")
    with_tags = cfg.time_tag.mode != "off"
    folders = tagged = checked = 0
    for store in stores:
        entries = store.index
        folders += len(entries)
        for e in entries:
            if e.timeTags is not None:
                tagged += 1
                fail += [f"{store.session_id}/{e.id}: {p}" for p in _tag_problems(e.timeTags)]
        index = TimeIndex(entries, tz_name, with_tags=with_tags)
        naive = [folder_time(e, with_tags=with_tags) for e in entries]
        for ft in naive:
            if index.folders.get(ft.id) != ft:
                fail.append(
                    f"{store.session_id}/{ft.id}: time index holds {index.folders.get(ft.id)}"
                )
        # windows around sampled folders: the index's answer is the naive overlap rule's
        step = max(1, len(naive) // TIME_WINDOWS_CHECKED)
        for ft in naive[::step][:TIME_WINDOWS_CHECKED]:
            a, b = ft.start - 86_400_000, ft.end + 86_400_000
            expect = {
                f.id
                for f in naive
                if (
                    any(x < b and y > a for x, y in f.tags) if f.tags else f.start < b and f.end > a
                )
            }
            got = index.window_ids(a, b)
            checked += 1
            if got != expect:
                odd = sorted(got ^ expect)
                fail.append(f"{store.session_id}: window around {ft.id} disagrees on {_names(odd)}")
    facts = (
        f"{len(stores)} store(s), {folders} folder(s), {tagged} with time tags, {checked} window(s)"
        f" cross-checked against naive intervals; mode={cfg.time.mode}, timeTag.mode="
        f"{cfg.time_tag.mode}, timezone={tz_name or 'UTC'}"
    )
    if fail:
        return Check(
            "time index", "FAIL", "; ".join(fail[:SHOWN]) + f"; {facts}", {"problems": fail}
        )
    if warn:
        return Check("time index", "WARN", "; ".join(warn) + f"; {facts}")
    return Check("time index", "PASS", f"time index consistent: {facts}")


# ---- recall fairness ----------------------------------------------------------------


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


def check_fairness(records: Iterable[Mapping[str, Any]]) -> Check:
    from rofmd.cli.stats_report import fairness_figures

    f = fairness_figures(records)
    lanes = "/".join(f"{k}={v}" for k, v in f["lanes"].items())
    detail = (
        f"{f['v140']}/{f['events']} v1.4.0 recall event(s); modes "
        f"{', '.join(f'{k}={v}' for k, v in f['modes'].items()) or 'none'}; lanes {lanes or 'none'};"
        f" registerDrops>0 {f['registerDropRounds']} (total {f['registerDrops']}), degraded"
        f" {f['degraded']}, reInjections {f['reInjections']}, timeFiltered>0"
        f" {f['timeFilteredRounds']}, hasMore {f['hasMore']}, missType "
        f"{', '.join(f'{k}={v}' for k, v in f['missTypes'].items()) or 'none'}; guarantees"
        f" meanPicks {f['meanPicks']}, highAlphaLaneShare {_share(f['highAlphaLaneShare'])}"
    )
    if f["events"] and not f["v140"]:
        return Check(
            "recall fairness", "PASS", "INFO: only telemetry older than v1.4.0; " + detail, f
        )
    if f["registerDrops"] or f["degraded"]:
        return Check(
            "recall fairness",
            "WARN",
            detail + "; guarantee degradation observed (registerDrops/degraded): check lane"
            " quota/ledger pressure",
            f,
        )
    return Check("recall fairness", "PASS", detail, f)


# ---- event tags ---------------------------------------------------------------------

SIMILAR_LABELS_COMPARED = 200


def check_events(stores: Sequence[ReadonlyStore], cfg: MemoryConfig) -> Check:
    from engine.config import PRODUCT_OVERRIDES
    from engine.scoring.events import folder_labels, similarity

    counts: Counter[str] = Counter()
    tagged = folders = 0
    for store in stores:
        for e in store.index:
            folders += 1
            labels = folder_labels(e.events, e.event)
            tagged += bool(labels)
            counts.update(labels)
    top = ", ".join(f"{k}={n}" for k, n in counts.most_common(3)) or "none"
    metric, threshold = cfg.event.similarity.metric, cfg.event.similarity.threshold
    labels = [k for k, _ in counts.most_common(SIMILAR_LABELS_COMPARED)]
    pairs = [
        (a, b)
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if similarity(a, b, metric) >= threshold
    ]
    packaged = PRODUCT_OVERRIDES.get("event.mode", ENGINE_DEFAULTS["event"]["mode"])
    detail = (
        f"INFO: {tagged}/{folders} folder(s) event-tagged; {len(counts)} distinct event(s); top:"
        f" {top}; event.mode engineDefault={ENGINE_DEFAULTS['event']['mode']},"
        f" packaged={packaged}, effective={cfg.event.mode}; similarity metric={metric}"
        f" threshold={threshold}; suspected unmerged pairs: {len(pairs)}"
        + (f" (e.g. {pairs[0][0]} ~ {pairs[0][1]})" if pairs else "")
    )
    return Check("event tags", "PASS", detail, {"pairs": [list(p) for p in pairs]})


# ---- session logs -------------------------------------------------------------------


def _logs(sessions_dir: Path, session: str | None, max_sessions: int) -> list[Path]:
    from rofmd.cli.repair_log_cli import find_logs

    if not sessions_dir.is_dir():
        return []
    logs = list(find_logs(sessions_dir))
    if session is not None:
        from engine.store import safe_session_id

        names = {session, safe_session_id(session)}
        logs = [p for p in logs if p.parent.name in names or _header_id(p) == session]
    if max_sessions > 0:
        logs = sorted(logs, key=lambda p: p.stat().st_mtime, reverse=True)[:max_sessions]
    return sorted(logs)


def _header_id(path: Path) -> str | None:
    from engine.sessionlog import LogScanner

    with path.open("rb") as fh:
        for item in LogScanner(fh):
            sid = item.event.get("id")
            return sid if item.event.get("type") == "session" and isinstance(sid, str) else None
    return None


def check_session_logs(sessions_dir: Path, session: str | None, max_sessions: int) -> Check:
    from engine.sessionlog import LogScanner
    from engine.sessionlog_notes import surface_notes

    logs = _logs(sessions_dir, session, max_sessions)
    if not logs:
        return Check("session logs", "WARN", f"no session logs under {sessions_dir}")
    fail: list[str] = []
    warn: list[str] = []
    notes = foreign = 0
    for path in logs:
        try:
            with path.open("rb") as fh:
                scanner = LogScanner(fh, keep_bad_lines=3)
                found = surface_notes(item.event for item in scanner)
        except OSError as exc:
            warn.append(f"{path}: unreadable ({exc.strerror or exc})")
            continue
        name = found.session or path.parent.name
        notes += len(found.own_notes)
        foreign += found.foreign_checkpoints
        if len(found.own_notes) > 1:
            seqs = ", ".join(str(s) for s, _ in found.own_notes)
            warn.append(
                f"session-log-multiple-notes: {name} has {len(found.own_notes)} notes of ours on"
                f" its final surface (seq {seqs}; legacy from before note merging)"
            )
        for seq in found.bad_counts:
            fail.append(f"{name}: the note at seq {seq} counts no segment")
        for seq, marker in found.reinjected:
            fail.append(f"{name}: the note at seq {seq} carries re-injected host text ({marker!r})")
        if scanner.error:
            warn.append(f"{path}: {scanner.error}")
    facts = f"{len(logs)} log(s), {notes} note(s) of ours, {foreign} foreign checkpoint(s)"
    if fail:
        return Check(
            "session logs", "FAIL", "; ".join(fail[:SHOWN]) + f"; {facts}", {"problems": fail}
        )
    if warn:
        return Check(
            "session logs",
            "WARN",
            f"{len(warn)} warning(s): {'; '.join(warn[:SHOWN])}; {facts}",
            {"warnings": warn},
        )
    return Check("session logs", "PASS", f"at most one note of ours per final surface; {facts}")


# ---- the command --------------------------------------------------------------------


def run_selfcheck(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    progress: Callable[[str], None] | None = None,
) -> list[Check]:
    """Every check, in the reference's order."""
    setup = _setup(args, environ)
    at = now_ms(args)
    checks = [setup.config]

    def step(name: str, make: Callable[[], Check]) -> None:
        if progress is not None:
            progress(name)
        checks.append(make())

    step("engine", lambda: check_engine(at))
    stores = read_listed(setup.where, args.session)
    records = {s.session_id: list(read_jsonl(s.paths.stats)) for s in stores}
    every = [r for rs in records.values() for r in rs]
    step("memory store", lambda: check_store(stores))
    step("recall state", lambda: check_recall_state(stores))
    step("pending era", lambda: check_pending_era(stores, records))
    step("time index", lambda: check_time(stores, setup.cfg))
    step("recall fairness", lambda: check_fairness(every))
    step("event tags", lambda: check_events(stores, setup.cfg))
    step(
        "session logs",
        lambda: check_session_logs(setup.sessions_dir, args.session, args.max_sessions),
    )
    return checks


def cmd_selfcheck(args: argparse.Namespace) -> int:
    """Run the checks (module docstring); exit 1 when one FAILs."""
    from rofmd.version import version

    if args.max_sessions < 0:
        raise UsageError(f"--max-sessions must be 0 (all) or more, got {args.max_sessions}")
    started = time.perf_counter()
    tty = sys.stderr.isatty() and not args.json

    def progress(name: str) -> None:
        if tty:
            print(f"checking {name} …", file=sys.stderr)

    checks = run_selfcheck(args, os.environ, progress)
    summary = {
        "passed": sum(c.status == "PASS" for c in checks),
        "warnings": sum(c.status == "WARN" for c in checks),
        "failed": sum(c.status == "FAIL" for c in checks),
    }
    if args.json:
        print_json(
            {
                "tool": "rofmd selfcheck",
                "version": version(),
                "generatedAt": now_ms(args),
                "durationMs": round((time.perf_counter() - started) * 1000, 1),
                "checks": [c.to_json() for c in checks],
                "summary": summary,
            }
        )
    else:
        for c in checks:
            print(c.line())
        print(
            f"selfcheck: {summary['passed']} passed, {summary['warnings']} warnings,"
            f" {summary['failed']} failed"
        )
    return 1 if summary["failed"] else 0


def add_selfcheck_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `selfcheck` to the `rofmd` subcommands."""
    p = sub.add_parser(
        "selfcheck",
        help="check config, engine, stores, recall state, eras, time, telemetry, session logs"
        " (read-only; exit 1 on a FAIL)",
        description="The independent health check. Writes nothing; exit 1 when a check FAILs.",
    )
    add_store_options(p, session_help="only this session's store and logs (default: all)")
    p.add_argument(
        "--sessions-dir",
        type=Path,
        help="DSH session logs (env ROFMD_SESSIONS_DIR; default $DSH_HOME/sessions, else"
        " ~/.dsh/sessions)",
    )
    p.add_argument(
        "--max-sessions",
        type=int,
        default=0,
        help="only the N most recently modified session logs (default 0: all)",
    )
    p.set_defaults(func=guarded("selfcheck", cmd_selfcheck))
