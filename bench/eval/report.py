"""The numbers of `make eval`: per language and regime, then per question kind.

Why these numbers. Evidence recall (evidence messages found in the block / all evidence
messages) is the question "did the model get to see what it needs"; the hit rate counts
questions with all their evidence in the block (what a multi-hop question needs). The
baseline gets the block's own budget: for each question `bm25s` returns as many folders
as the block holds (``bm25s@n``; a block of 0 memories gives bm25s 0 folders too, so
neither side gets a free guess, and the distribution of n is printed), plus a fixed
top 3 (``bm25s@3``) as a reference point that does not depend on rofmd. Characters are
what the memories cost in the prompt: the block's entries without its fixed preamble,
against the text of the folders bm25s returned.

Diagnostics (``--diagnose``): where the sequence regime loses evidence the same question
found fresh, per kind, and what the block held instead: a folder archived while the
questions were asked (the conversation's own questions and answers), an entry carried
over from the question before, or neither (only folders of the played conversation).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from bench.eval.generate import LANGS, QUESTION_KINDS
from bench.eval.play import REGIMES, Answer, ConversationRun


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def metrics(answers: Sequence[Answer]) -> dict[str, Any]:
    """The aggregate numbers of a set of answers (all shares in [0, 1])."""
    n = len(answers)
    evidence = sum(a.evidence for a in answers)
    found = sum(a.found for a in answers)
    bm25 = sum(a.bm25_found for a in answers)
    top3 = sum(a.top3_found for a in answers)
    recall = found / evidence if evidence else 0.0
    bm25_recall = bm25 / evidence if evidence else 0.0
    return {
        "questions": n,
        "evidence": evidence,
        "rofmdRecall": round(recall, 4),
        "bm25Recall": round(bm25_recall, 4),
        "ratio": _ratio(recall, bm25_recall),
        "bm25Top3Recall": round(top3 / evidence, 4) if evidence else 0.0,
        "rofmdHitRate": round(sum(a.found == a.evidence for a in answers) / n, 4) if n else 0.0,
        "bm25HitRate": round(sum(a.bm25_found == a.evidence for a in answers) / n, 4) if n else 0.0,
        "meanFolders": round(sum(a.entries for a in answers) / n, 2) if n else 0.0,
        "meanEntryChars": round(sum(a.entry_chars for a in answers) / n) if n else 0,
        "meanBlockChars": round(sum(a.block_chars for a in answers) / n) if n else 0,
        "meanBm25Chars": round(sum(a.bm25_chars for a in answers) / n) if n else 0,
        "budget": {str(k): v for k, v in sorted(Counter(a.entries for a in answers).items())},
        "identicalBlocks": sum(a.identical for a in answers),
    }


LOSS_REASONS = ("archived while asking", "carried over", "other")


def sequence_losses(runs: Sequence[ConversationRun]) -> dict[str, dict[str, dict[str, int]]]:
    """Per language and kind: evidence found fresh but not in sequence, by what the
    sequence block held instead (module docstring; a loss with both an archived folder
    and a carried entry counts under both), and how many questions lost any."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for run in runs:
        played = set(run.played)
        fresh = {a.question: a for a in run.answers if a.regime == "fresh"}
        before: set[str] = set()
        by_kind = out.setdefault(run.conv.lang, {})
        for a in run.answers:
            if a.regime != "sequence":
                continue
            f = fresh.get(a.question)
            block = set(a.block_ids)
            if f is not None and a.found < f.found:
                lost = f.found - a.found
                row = by_kind.setdefault(
                    a.kind, {"questions": 0, "lost": 0, **dict.fromkeys(LOSS_REASONS, 0)}
                )
                row["questions"] += 1
                row["lost"] += lost
                archived = bool(block - played)
                carried = bool(block & before)
                if archived:
                    row["archived while asking"] += lost
                if carried:
                    row["carried over"] += lost
                if not archived and not carried:
                    row["other"] += lost
            before = block
    return out


def summarise(runs: Sequence[ConversationRun]) -> dict[str, Any]:
    """Everything the table shows, as JSON."""
    answers = [(r.conv.lang, a) for r in runs for a in r.answers]
    out: dict[str, Any] = {}
    for lang in LANGS:
        mine = [a for lg, a in answers if lg == lang]
        if not mine:
            continue
        by_regime: dict[str, Any] = {}
        for regime in REGIMES:
            rows = [a for a in mine if a.regime == regime]
            entry = metrics(rows)
            entry["byKind"] = {
                kind: metrics([a for a in rows if a.kind == kind])
                for kind in QUESTION_KINDS
                if any(a.kind == kind for a in rows)
            }
            by_regime[regime] = entry
        fresh, seq = by_regime["fresh"]["rofmdRecall"], by_regime["sequence"]["rofmdRecall"]
        lang_runs = [r for r in runs if r.conv.lang == lang]
        by_regime["sequenceOverFresh"] = _ratio(seq, fresh)
        by_regime["runs"] = {
            "conversations": len(lang_runs),
            "messages": sum(len(r.conv.messages()) for r in lang_runs),
            "archivedMessages": sum(r.archived_messages for r in lang_runs),
            "archives": sum(r.archives for r in lang_runs),
            "folders": sum(r.folders for r in lang_runs),
            "scoredFolders": sum(r.scored for r in lang_runs),
            "questions": sum(len(r.conv.questions) for r in lang_runs),
            "asked": sum(r.asked for r in lang_runs),
            "archivesWhileAsking": sum(r.question_archives for r in lang_runs),
            "skipped": dict(sum((r.skipped for r in lang_runs), Counter())),
        }
        by_regime["sequenceLosses"] = sequence_losses(lang_runs).get(lang, {})
        out[lang] = by_regime
    return out


def _skipped(skipped: dict[str, int]) -> str:
    """Why the other questions were not asked."""
    if not skipped:
        return "none skipped"
    return "skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _num(x: float | None) -> str:
    return "    —" if x is None else f"{x:5.2f}"


def _recall_cells(m: dict[str, Any]) -> list[str]:
    """questions, rofmd, bm25s@n, ratio, bm25s@3 and rofmd's hit rate: the columns the
    regime table and the per-kind table share."""
    return [
        str(m["questions"]),
        _pct(m["rofmdRecall"]),
        _pct(m["bm25Recall"]),
        _num(m["ratio"]),
        _pct(m["bm25Top3Recall"]),
        _pct(m["rofmdHitRate"]),
    ]


def _rows(out: TextIO, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for j, row in enumerate(table):
        out.write("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + "\n")
        if j == 0:
            out.write("  " + "  ".join("-" * w for w in widths) + "\n")


def render_losses(summary: dict[str, Any], out: TextIO) -> None:
    """The ``--diagnose`` table: :func:`sequence_losses` of every language."""
    out.write(
        "\nevidence found fresh but lost in sequence (evidence messages; what the block"
        " held instead)\n"
    )
    header = ["lang", "kind", "questions", "lost", *LOSS_REASONS]
    rows = []
    for lang, by_regime in summary.items():
        for kind, row in by_regime.get("sequenceLosses", {}).items():
            rows.append([lang, kind, *(str(row[h]) for h in header[2:])])
    if rows:
        _rows(out, header, rows)
    else:
        out.write("  none\n")


def render(summary: dict[str, Any], out: TextIO) -> None:
    """The human-readable tables."""
    w = out.write
    w(
        "\nrecall quality: evidence messages in rofmd's recall block vs bm25s over the same"
        " scored folders\n(bm25s@n: as many folders as the block holds; chars: rofmd block"
        " entries / bm25s folder text)\n\n"
    )
    header = [
        "lang",
        "regime",
        "questions",
        "rofmd",
        "bm25s@n",
        "ratio",
        "bm25s@3",
        "rofmd hit",
        "bm25s hit",
        "folders",
        "rofmd chars",
        "bm25s chars",
    ]
    rows = []
    for lang, by_regime in summary.items():
        for regime in REGIMES:
            m = by_regime[regime]
            rows.append(
                [
                    lang,
                    regime,
                    *_recall_cells(m),
                    _pct(m["bm25HitRate"]),
                    f"{m['meanFolders']:.2f}",
                    str(m["meanEntryChars"]),
                    str(m["meanBm25Chars"]),
                ]
            )
    _rows(out, header, rows)

    w("\nper question kind\n")
    header = ["lang", "regime", "kind", "questions", "rofmd", "bm25s@n", "ratio", "bm25s@3", "hit"]
    rows = []
    for lang, by_regime in summary.items():
        for regime in REGIMES:
            for kind, m in by_regime[regime]["byKind"].items():
                rows.append([lang, regime, kind, *_recall_cells(m)])
    _rows(out, header, rows)

    w("\nbudget n (memories in the block → questions), and the sequence regime\n")
    for lang, by_regime in summary.items():
        for regime in REGIMES:
            budget = " ".join(f"{k}:{v}" for k, v in by_regime[regime]["budget"].items())
            w(f"  {lang} {regime:<8} n = {budget}\n")
        seq = by_regime["sequence"]
        w(
            f"  {lang} sequence/fresh rofmd recall: {_num(by_regime['sequenceOverFresh']).strip()};"
            f" {seq['identicalBlocks']}/{seq['questions']} questions saw the same block as the"
            " question before\n"
        )
    w("\nruns\n")
    for lang, by_regime in summary.items():
        r = by_regime["runs"]
        share = r["archivedMessages"] / r["messages"] if r["messages"] else 0.0
        w(
            f"  {lang}: {r['conversations']} conversations, {r['messages']} messages,"
            f" {r['archives']} archives into {r['folders']} folders ({r['scoredFolders']} scored,"
            f" {_pct(share).strip()} of the messages archived), {r['asked']}/{r['questions']}"
            f" questions asked ({_skipped(r.get('skipped', {}))}),"
            f" {r['archivesWhileAsking']} archives while asking\n"
        )
