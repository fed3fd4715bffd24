"""The §1.6 report over ``stats.jsonl`` (the reference's ``tools/recall-report.mjs``).

:func:`build_report` aggregates telemetry records into one JSON-able dict;
:func:`render_report` prints it for a person. Shares are ratios of sums over the
rounds that carry the denominator (``contextTokens`` for the share of the context,
``contextWindow`` for the share of the window); a figure without data is ``None`` and
prints as ``n/a``. Records written before a field existed simply do not count for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["build_report", "render_report"]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: Any) -> int:
    n = _num(value)
    return int(n) if n is not None else 0


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 6) if den > 0 else None


def build_report(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate telemetry records (any order, unknown types ignored)."""
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
    return "\n".join(
        [
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
        ]
    )
