"""`rofmd simulate`: the deterministic end-to-end simulation (reference `test/simulate.mjs`).

A long scripted conversation (the demo's turns, then more days of tool-heavy work built
by the same generators) is played in-process against a temporary memory directory
through the engine's standalone path: every turn adds its messages to the live
context; when the context passes `compress.triggerPercent` the earliest share is
archived (`rofmd engine compress`'s path: heuristic scores, `scored: true`) and
replaced by the checkpoint note; every user message runs one recall round (`rofmd
engine recall`'s path), and the recall block counts against the window. At the end
the demo's questions are asked.

It prints what came back: the added-back ratio (characters of archived conversation
that recall brought back at least once / characters archived) and characters (the
sum over rounds of what recall injected), with folders, archives and recalls. Same
code, same numbers: the clock is the script's, no wall time anywhere. The shipped
config's packaged defaults are used (no user config), so the numbers do not depend on
the machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engine.archive.standalone import archive_conversation
from engine.archive.tokens import MESSAGE_OVERHEAD, estimate_text_tokens
from engine.config import MemoryConfig, load_config
from engine.recall.standalone import StandaloneRecall, append_round_stats, recall_once
from engine.store import open_session, read_jsonl
from rofmd.cli.json_out import print_json
from rofmd.cli.stats_report import build_report
from rofmd.host.demo_script import (
    MINUTE_MS,
    START_MS,
    Step,
    Turn,
    demo_script,
    listing_text,
    nginx_log_text,
    pytest_output_text,
)

__all__ = ["SIM_SESSION", "SIM_WINDOW", "SimResult", "add_simulate_parser", "run_simulation"]

SIM_SESSION = "simulate"
SIM_WINDOW = 32_768
ARCHIVER = "rofmd-simulate"

_DAYS = (
    (
        "Deploy day: the staging box is db-7.internal; we settled on Postgres 16 with "
        "pgbouncer in transaction mode, pool size 40.",
        "Noted: staging database db-7.internal, Postgres 16, pgbouncer transaction mode, "
        "pool size 40.",
    ),
    (
        "以后所有发布都必须先在灰度环境跑满 2 小时,这是我们的规则,记住。",
        "记住了:以后每次发布都先在灰度环境跑满 2 小时,作为固定规则。",
    ),
    (
        "I prefer short commit messages in English, imperative mood, max 50 characters.",
        "Got it: short English commit messages, imperative mood, at most 50 characters.",
    ),
    (
        "我们约定每周四下午三点开迭代评审会,地点在 3 楼的长城会议室。",
        "好的:迭代评审会固定在每周四 15:00,3 楼长城会议室。",
    ),
)


def _work_turns(day: int) -> tuple[Turn, ...]:
    """One more day of work: a fact worth remembering, then bulk tool output."""
    fact, answer = _DAYS[day % len(_DAYS)]
    seed = 11 + day * 5
    return (
        Turn(fact, (Step(answer),)),
        Turn(
            f"Tail the error log again (round {day + 1}).",
            (
                Step(
                    "Reading the log.",
                    (("bash", {"cmd": "tail -n 140 error.log"}, nginx_log_text(140, seed)),),
                ),
                Step(f"Round {day + 1}: the upstream errors are the known timeout pattern."),
            ),
        ),
        Turn(
            f"跑一下第 {day + 1} 轮回归测试。",
            (
                Step(
                    "运行测试。",
                    (("bash", {"cmd": "pytest -q"}, pytest_output_text(150, seed + 1)),),
                ),
                Step(f"第 {day + 1} 轮回归:失败的用例都和分页有关。"),
            ),
        ),
        Turn(
            f"List the build artefacts of day {day + 1}.",
            (
                Step("Listing.", (("bash", {"cmd": "ls -l dist"}, listing_text(120, seed + 2)),)),
                Step("All artefacts are present."),
            ),
        ),
    )


QUESTIONS = (
    ("Which database host and pool size did we settle on for staging?", "db-7.internal"),
    ("发布前灰度环境要跑多久?", "2 小时"),
    ("How should commit messages be written?", "imperative"),
    ("迭代评审会在什么时候开?", "周四"),
)


def script_turns() -> tuple[Turn, ...]:
    """The whole conversation: the demo's turns, then four more days of work."""
    turns = list(demo_script().turns)
    for day in range(len(_DAYS)):
        turns.extend(_work_turns(day))
    return tuple(turns)


def turn_messages(turn: Turn, n: int) -> list[dict[str, Any]]:
    """A turn as conversation.json messages (tool calls as blocks, results as tool rows)."""
    user_text = turn.user + (f"\n[image: {turn.image}]" if turn.image else "")
    out: list[dict[str, Any]] = [{"role": "user", "content": user_text}]
    for k, step in enumerate(turn.steps):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
        results: list[dict[str, Any]] = []
        for j, (name, arguments, result) in enumerate(step.tools):
            call_id = f"call-{n}-{k}-{j}"
            blocks.append(
                {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
            )
            results.append(
                {
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": result}],
                }
            )
        out.append({"role": "assistant", "content": blocks})
        out.extend(results)
    return out


def _message_tokens(m: dict[str, Any]) -> int:
    content = m["content"]
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(
            str(b.get("text") or orjson.dumps(b.get("arguments")).decode()) for b in content
        )
    return estimate_text_tokens(text) + MESSAGE_OVERHEAD


@dataclass
class SimResult:
    """What the simulation did; `to_json` is what `--json` prints."""

    turns: int = 0
    messages: int = 0
    archives: int = 0
    folders: int = 0
    archived_messages: int = 0
    archived_chars: int = 0
    recall_rounds: int = 0
    recalled: int = 0
    added_chars: int = 0
    added_tokens: int = 0
    distinct_recalled_chars: int = 0
    peak_percent: float = 0.0
    final_percent: float = 0.0
    answers: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def added_back_ratio(self) -> float:
        return self.distinct_recalled_chars / self.archived_chars if self.archived_chars else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "messages": self.messages,
            "archives": self.archives,
            "folders": self.folders,
            "archivedMessages": self.archived_messages,
            "archivedChars": self.archived_chars,
            "recallRounds": self.recall_rounds,
            "recalled": self.recalled,
            "addedBackChars": self.added_chars,
            "addedBackTokens": self.added_tokens,
            "distinctRecalledChars": self.distinct_recalled_chars,
            "addedBackRatio": round(self.added_back_ratio, 4),
            "peakPercent": round(self.peak_percent, 2),
            "finalPercent": round(self.final_percent, 2),
            "answers": self.answers,
            "report": self.report,
        }


def simulation_config() -> MemoryConfig:
    """The packaged defaults only: no user config, no environment."""
    return load_config(None, {}).config


def run_simulation(root: Path, cfg: MemoryConfig | None = None) -> SimResult:
    """Play the script against the memory root `root` (a fresh directory)."""
    cfg = cfg or simulation_config()
    store = open_session(root, SIM_SESSION, per_session=True)
    recall = StandaloneRecall.open(store, cfg)
    res = SimResult()
    live: list[dict[str, Any]] = []
    folder_chars: dict[str, int] = {}
    seen: set[str] = set()
    clock = START_MS

    def used_tokens() -> int:
        block = recall.state.block
        extra = estimate_text_tokens(block) + MESSAGE_OVERHEAD if block else 0
        return sum(_message_tokens(m) for m in live) + extra

    def ask(text: str) -> None:
        outcome = recall_once(recall, text, now_ms=clock, context_window=SIM_WINDOW, turn=res.turns)
        append_round_stats(store, outcome, contextTokens=used_tokens())
        if not outcome.ran:
            return
        res.recall_rounds += 1
        res.recalled += len(outcome.recalled)
        res.added_chars += int(outcome.recall_record.get("addedChars", 0))
        res.added_tokens += int(outcome.recall_record.get("addedTokens", 0))
        for fid in outcome.recalled:
            if fid not in seen:
                seen.add(fid)
                res.distinct_recalled_chars += folder_chars.get(fid, 0)

    def maybe_archive() -> None:
        percent = used_tokens() * 100 / SIM_WINDOW
        res.peak_percent = max(res.peak_percent, percent)
        if percent <= cfg.compress.trigger_percent:
            return
        result = archive_conversation(
            store,
            live,
            used_percent=min(100.0, percent),
            window=SIM_WINDOW,
            now_ms=clock,
            cfg=cfg,
            archiver_version=ARCHIVER,
        )
        if not result.archived or result.commit is None:
            return
        plan = result.plan
        res.archives += 1
        res.folders += len(result.commit.written)
        res.archived_messages += plan.archived_messages
        for fid, folder in zip(result.commit.folder_ids, plan.folders, strict=True):
            folder_chars[fid] = folder.chars
            res.archived_chars += folder.chars
        note = {
            "role": "user",
            "content": plan.note,
            "source": {"kind": "compact-checkpoint"},
        }
        live[plan.start_seq : plan.end_seq + 1] = [note]

    for n, turn in enumerate(script_turns()):
        clock += MINUTE_MS
        res.turns += 1
        msgs = turn_messages(turn, n)
        live.append(msgs[0])
        ask(turn.user)
        for m in msgs[1:]:
            live.append(m)
        res.messages += len(msgs)
        maybe_archive()
    for question, expect in (*((q.text, q.expect) for q in demo_script().questions), *QUESTIONS):
        clock += MINUTE_MS
        res.turns += 1
        ask(question)
        in_context = any(expect in orjson.dumps(m).decode() for m in live)
        res.answers.append(
            {
                "question": question,
                "expect": expect,
                "found": expect in recall.state.block,
                "inContext": in_context,
            }
        )
    res.final_percent = used_tokens() * 100 / SIM_WINDOW
    rep = build_report(read_jsonl(store.paths.stats))
    rep["recall"].pop("averageMs", None)
    res.report = rep
    return res


def render(res: SimResult) -> str:
    """The human-readable summary."""
    found = sum(1 for a in res.answers if a["found"])
    live = sum(1 for a in res.answers if a["inContext"] and not a["found"])
    lines = [
        f"simulated {res.turns} turns, {res.messages} messages, window {SIM_WINDOW} tokens",
        f"archives        {res.archives} ({res.folders} folders, {res.archived_messages}"
        f" messages, {res.archived_chars} chars; context peak {res.peak_percent:.1f}%,"
        f" final {res.final_percent:.1f}%)",
        f"recalls         {res.recall_rounds} rounds, {res.recalled} memories recalled",
        f"added back      {res.added_chars} chars (~{res.added_tokens} tokens) over all rounds",
        f"added-back ratio {res.added_back_ratio * 100:.2f}% of the archived conversation"
        f" ({res.distinct_recalled_chars} / {res.archived_chars} chars came back)",
        f"answers         {found}/{len(res.answers)} recalled into the block, {live} still in"
        " the live context",
    ]
    for a in res.answers:
        tag = "ok  " if a["found"] else ("live" if a["inContext"] else "MISS")
        lines.append(f"  {tag}  {a['question']}  ({a['expect']})")
    return "\n".join(lines)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run the simulation in a temporary memory directory (or --keep DIR)."""
    keep: Path | None = args.keep
    if keep is not None:
        if keep.exists() and any(keep.iterdir()):
            print(
                f"rofmd simulate: --keep {keep} must be a new or empty directory", file=sys.stderr
            )
            return 2
        keep.mkdir(parents=True, exist_ok=True)
        root = keep
    else:
        root = Path(tempfile.mkdtemp(prefix="rofmd-simulate-"))
    try:
        res = run_simulation(root)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print_json(res.to_json())
    else:
        print(render(res))
        if keep is not None:
            print(f"memory directory kept at {keep}")
    return 0


def add_simulate_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `simulate` to `sub`."""
    p = sub.add_parser(
        "simulate",
        help="deterministic end-to-end simulation: archive, heuristic scoring, recall",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--keep", type=Path, metavar="DIR", help="write the memory directory here and keep it"
    )
    func: Callable[[argparse.Namespace], int] = cmd_simulate
    p.set_defaults(func=func)
