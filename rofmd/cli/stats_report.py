"""The §1.6 report over ``stats.jsonl`` (the reference's ``tools/recall-report.mjs``).

:func:`build_report` aggregates telemetry records into one JSON-able dict;
:func:`render_report` prints it for a person. Shares are ratios of sums over the
rounds that carry the denominator (``contextTokens`` for the share of the context,
``contextWindow`` for the share of the window); a figure without data is ``None`` and
prints as ``n/a``. Records written before a field existed simply do not count for it.

:func:`fairness_figures` is the v1.4.0 lane / guarantee / time-filter aggregate of the
``recall`` records, shared with ``rofmd selfcheck`` (its "recall fairness" line), so both
count the same way. The pending eras come from the stores, not the telemetry
(:mod:`engine.scoring.era_audit`); the caller passes them in. :func:`timeline` counts as
:func:`build_report` does, per time bucket (the charts of ``rofmd report --html``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from engine.scoring.era_audit import EraTotals

__all__ = [
    "FAIR_LANES",
    "HIGH_ALPHA_LANES",
    "build_report",
    "fairness_figures",
    "render_report",
    "timeline",
]

FAIR_LANES = ("rareHigh", "queryBoost", "register", "hi", "lowProbe", "rotation", "recycle")
"""FAIR-DRI's lanes (``engine.recall.fair.LANES``; the ranked and legacy modes pick
through others)."""
HIGH_ALPHA_LANES = ("rareHigh", "hi")
"""The lanes that carry high-α memories: their share of FAIR-DRI's picks is the
reference's ``highAlphaLaneShare`` guarantee figure (None: no FAIR-DRI pick)."""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int:
    n = _num(value)
    return int(n) if n is not None else 0


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 6) if den > 0 else None


def fairness_figures(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Lanes, guarantees and time filters of the ``recall`` records (automatic rounds and
    memory_recall calls alike). A record is v1.4.0 when it carries ``lanesPicked``; an
    older one counts as an event only (missing fields are missing, not zero)."""
    events = v140 = degraded = reinjections = drops = drop_rounds = 0
    time_rounds = time_folders = windows = has_more = 0
    modes: Counter[str] = Counter()
    lanes: Counter[str] = Counter()
    miss: Counter[str] = Counter()
    for r in records:
        if r.get("type") != "recall":
            continue
        events += 1
        lp = r.get("lanesPicked")
        if not isinstance(lp, Mapping):
            continue
        v140 += 1
        if isinstance(r.get("mode"), str):
            modes[r["mode"]] += 1
        for lane, n in lp.items():
            lanes[str(lane)] += _int(n)
        n_drops = _int(r.get("registerDrops"))
        drops += n_drops
        drop_rounds += n_drops > 0
        degraded += r.get("degraded") is True
        reinjections += _int(r.get("reInjections"))
        filtered = _int(r.get("timeFiltered"))
        time_rounds += filtered > 0
        time_folders += filtered
        windows += isinstance(r.get("timeWindow"), Mapping)
        has_more += r.get("hasMore") is True
        if isinstance(r.get("missType"), str):
            miss[r["missType"]] += 1
    picks = sum(lanes.values())
    fair_picks = sum(lanes.get(lane, 0) for lane in FAIR_LANES)
    high = sum(lanes.get(lane, 0) for lane in HIGH_ALPHA_LANES)
    return {
        "events": events,
        "v140": v140,
        "modes": dict(sorted(modes.items())),
        "lanes": dict(sorted(lanes.items())),
        "registerDrops": drops,
        "registerDropRounds": drop_rounds,
        "degraded": degraded,
        "reInjections": reinjections,
        "timeFilteredRounds": time_rounds,
        "timeFiltered": time_folders,
        "timeWindows": windows,
        "hasMore": has_more,
        "missTypes": dict(sorted(miss.items())),
        "meanPicks": round(picks / v140, 2) if v140 else None,
        "highAlphaLaneShare": round(high / fair_picks, 4) if fair_picks else None,
    }


def build_report(
    records: Iterable[Mapping[str, Any]], eras: EraTotals | None = None
) -> dict[str, Any]:
    """Aggregate telemetry records (any order, unknown types ignored); ``eras``: the
    pending eras of the stores the records belong to (None: not reported)."""
    records = list(records)
    rounds = rounds_with_additions = recalled = 0
    added_chars = added_tokens = 0
    share_tokens = share_context = 0.0
    window_tokens = window_total = 0.0
    generations: Counter[str] = Counter()
    lanes: Counter[str] = Counter()
    miss: Counter[str] = Counter()
    elapsed: list[float] = []
    betas: list[float] = []
    compressions = rollbacks = folders = archived_messages = shadowed_tokens = 0
    pending_created = scored_at_archive = images = 0
    pinned_shadowed = pinned_recorded = pinned_chars = merged = segments = 0
    rearchives = rearchive_folders = rearchive_tokens = 0
    heuristic_scored = judge_rounds = judge_updated = 0
    for r in records:
        kind = r.get("type")
        if kind == "recall":
            rounds += 1
            added = [a for a in r.get("added") or [] if isinstance(a, Mapping)]
            recalled += len(added)
            rounds_with_additions += bool(added)
            chars = _num(r.get("addedChars"))
            if chars is None:
                chars = _num(r.get("roundBudgetChars")) or 0.0
            tokens = _num(r.get("addedTokens"))
            added_chars += int(chars)
            added_tokens += int(tokens or 0)
            ctx = _num(r.get("contextTokens"))
            if ctx and tokens is not None:
                share_tokens += tokens
                share_context += ctx
            win = _num(r.get("contextWindow"))
            if win and tokens is not None:
                window_tokens += tokens
                window_total += win
            for a in added:
                generations[str(_int(a.get("generation")) or 1)] += 1
                b = _num(a.get("beta"))
                if b is not None:
                    betas.append(b)
            lp = r.get("lanesPicked")
            if isinstance(lp, Mapping):
                for lane, n in lp.items():
                    lanes[str(lane)] += _int(n)
            if isinstance(r.get("missType"), str):
                miss[r["missType"]] += 1
            ms = _num(r.get("elapsedMs"))
            if ms is not None:
                elapsed.append(ms)
        elif kind == "compress-applied":
            if r.get("rollback"):
                rollbacks += 1
                continue
            compressions += 1
            folders += _int(r.get("foldersCommitted"))
            archived_messages += _int(r.get("archivedMessages"))
            shadowed_tokens += _int(r.get("shadowedTokenCount"))
            for f in r.get("folderMetadata") or []:
                if not isinstance(f, Mapping):
                    continue
                pending_created += bool(f.get("pending"))
                scored_at_archive += not f.get("pending") and bool(f.get("scored"))
                images += _int(f.get("images"))
            pinned_shadowed += _int(r.get("pinnedShadowed"))
            pinned_recorded += _int(r.get("pinnedRecorded"))
            pinned_chars += _int(r.get("pinnedChars"))
            merged += _int(r.get("mergedCheckpoints"))
            segments = max(segments, _int(r.get("archiveSegments")))
        elif kind == "rearchive":
            rearchives += 1
            rearchive_folders += len(r.get("removedIds") or [])
            rearchive_tokens += _int(r.get("removedTokens"))
        elif kind == "heuristic-score":
            heuristic_scored += _int(r.get("count"))
        elif kind == "judge":
            judge_rounds += 1
            judge_updated += _int(r.get("updated"))
    beta: dict[str, Any] = {"count": len(betas), "mean": None, "high": 0, "mid": 0, "low": 0}
    if betas:
        beta["mean"] = round(sum(betas) / len(betas), 4)
        beta["high"] = sum(1 for b in betas if b >= 7)
        beta["mid"] = sum(1 for b in betas if 0 <= b < 7)
        beta["low"] = sum(1 for b in betas if b < 0)
    return {
        "recall": {
            "rounds": rounds,
            "roundsWithAdditions": rounds_with_additions,
            "recalled": recalled,
            "addedChars": added_chars,
            "addedTokens": added_tokens,
            "shareOfContext": _ratio(share_tokens, share_context),
            "shareOfWindow": _ratio(window_tokens, window_total),
            "generations": dict(sorted(generations.items(), key=lambda kv: int(kv[0]))),
            "lanes": dict(sorted(lanes.items())),
            "missTypes": dict(sorted(miss.items())),
            "averageMs": round(sum(elapsed) / len(elapsed), 3) if elapsed else None,
        },
        "compress": {
            "count": compressions,
            "rollbacks": rollbacks,
            "folders": folders,
            "archivedMessages": archived_messages,
            "shadowedTokens": shadowed_tokens,
        },
        "rearchive": {
            "events": rearchives,
            "folders": rearchive_folders,
            "tokens": rearchive_tokens,
        },
        "pending": {
            "created": pending_created,
            "scoredAtArchive": scored_at_archive,
            "heuristicScored": heuristic_scored,
            "judgeRounds": judge_rounds,
            "judgeUpdated": judge_updated,
        },
        "beta": beta,
        "images": images,
        "pinned": {"shadowed": pinned_shadowed, "recorded": pinned_recorded, "chars": pinned_chars},
        "checkpoints": {"merged": merged, "archiveSegments": segments},
        "fairness": fairness_figures(records),
        "eras": eras.to_json() if eras is not None else None,
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.2f}%"


def render_report(rep: Mapping[str, Any]) -> str:
    """The report for a person, one fact per line."""
    rc, cp, ra, pd, bt = (
        rep["recall"],
        rep["compress"],
        rep["rearchive"],
        rep["pending"],
        rep["beta"],
    )
    gens = ", ".join(f"gen {g}: {n}" for g, n in rc["generations"].items()) or "none"
    lanes = ", ".join(f"{k} {v}" for k, v in rc["lanes"].items() if v) or "none"
    avg = "n/a" if rc["averageMs"] is None else f"{rc['averageMs']:.1f} ms"
    if bt["count"]:
        beta = (
            f"mean {bt['mean']:+.2f} over {bt['count']} (β≥7: {bt['high']}, 0≤β<7: {bt['mid']},"
            f" β<0: {bt['low']})"
        )
    else:
        beta = "n/a"
    pin = rep["pinned"]
    fair = rep.get("fairness") or fairness_figures(())
    share = fair["highAlphaLaneShare"]
    guarantees = (
        f"{fair['v140']} v1.4.0 round(s); degraded {fair['degraded']}, registerDrops"
        f" {fair['registerDrops']}, reInjections {fair['reInjections']}; meanPicks"
        f" {'n/a' if fair['meanPicks'] is None else fair['meanPicks']}, high-α lane share"
        f" {_pct(share)}"
    )
    time_line = (
        f"{fair['timeFilteredRounds']} round(s) filtered by time ({fair['timeFiltered']}"
        f" folder(s) left out), {fair['timeWindows']} with a time window, missType time"
        f" {fair['missTypes'].get('time', 0)}"
    )
    lines = [
        f"context added back       {_pct(rc['shareOfContext'])} of the context,"
        f" {_pct(rc['shareOfWindow'])} of the window",
        f"added back               {rc['addedChars']} chars, ~{rc['addedTokens']} tokens",
        f"recall rounds            {rc['rounds']} ({rc['roundsWithAdditions']} added"
        f" something), {rc['recalled']} memories recalled",
        f"per generation           {gens}",
        f"lanes                    {lanes}",
        f"average recall time      {avg}",
        f"compressions             {cp['count']} ({cp['folders']} folders,"
        f" {cp['archivedMessages']} messages, {cp['shadowedTokens']} tokens;"
        f" {cp['rollbacks']} rolled back)",
        f"rearchive                {ra['events']} events, {ra['folders']} folders,"
        f" {ra['tokens']} tokens moved out of the recall block",
        f"pending                  {pd['created']} created pending,"
        f" {pd['scoredAtArchive']} scored at archive, {pd['heuristicScored']} heuristic,"
        f" {pd['judgeRounds']} judge rounds ({pd['judgeUpdated']} updated)",
        f"beta                     {beta}",
        f"archived images          {rep['images']}",
        f"pinned context merged    {pin['shadowed']} shadowed, {pin['recorded']} recorded"
        f" ({pin['chars']} chars)",
        f"checkpoint notes merged  {rep['checkpoints']['merged']}"
        f" ({rep['checkpoints']['archiveSegments']} archive segments)",
        f"fairness                 {guarantees}",
        f"time filters             {time_line}",
    ]
    eras = rep.get("eras")
    if eras is not None:
        lines.append(f"pending eras             {_eras_line(eras)}")
    return "\n".join(lines)


def _eras_line(eras: Mapping[str, Any]) -> str:
    by = eras["pendingByEra"]
    current = eras["measures"]["C"]
    return (
        f"{eras['pending']} pending of {eras['folders']} folders: legacy {by['legacy']},"
        f" synthetic {by['synthetic']}, current {by['current']}"
        f" ({_pct(current['share'])} of {current['folders']} current folders)"
    )


def timeline(records: Iterable[Mapping[str, Any]], bucket_ms: int) -> list[dict[str, Any]]:
    """The report's counts per time bucket (``rofmd report --html`` draws them), counted as
    :func:`build_report` counts them: archives are the ``compress-applied`` records that
    are not rollbacks, with their ``foldersCommitted``; recall rounds the ``recall``
    records, with their ``added`` memories; the share of the window is the ratio of sums
    over the rounds that carry ``contextWindow``. ``pending`` is the backlog an archive
    left (its ``pendingCount``, the bucket's last). Records without a ``time`` are left
    out; the buckets run from the first record's to the last's, empty ones included."""
    rows: dict[int, dict[str, Any]] = {}
    sums: dict[int, list[float]] = {}
    last_pending: dict[int, tuple[float, int]] = {}
    for r in records:
        at = _num(r.get("time"))
        if at is None:
            continue
        key = int(at) // bucket_ms
        row = rows.setdefault(
            key,
            {"archives": 0, "folders": 0, "recallRounds": 0, "recalled": 0, "judged": 0},
        )
        kind = r.get("type")
        if kind == "compress-applied" and not r.get("rollback"):
            row["archives"] += 1
            row["folders"] += _int(r.get("foldersCommitted"))
            pending = _num(r.get("pendingCount"))
            if pending is not None and at >= last_pending.get(key, (-1.0, 0))[0]:
                last_pending[key] = (at, int(pending))
        elif kind == "recall":
            row["recallRounds"] += 1
            row["recalled"] += sum(1 for a in r.get("added") or [] if isinstance(a, Mapping))
            tokens, win = _num(r.get("addedTokens")), _num(r.get("contextWindow"))
            if win and tokens is not None:
                acc = sums.setdefault(key, [0.0, 0.0])
                acc[0] += tokens
                acc[1] += win
        elif kind == "judge":
            row["judged"] += _int(r.get("updated"))
    if not rows:
        return []
    out = []
    for key in range(min(rows), max(rows) + 1):
        row = rows.get(key) or {
            "archives": 0,
            "folders": 0,
            "recallRounds": 0,
            "recalled": 0,
            "judged": 0,
        }
        share = sums.get(key)
        out.append(
            {
                "start": key * bucket_ms,
                **row,
                "pending": last_pending[key][1] if key in last_pending else None,
                "shareOfWindow": _ratio(share[0], share[1]) if share else None,
            }
        )
    return out
