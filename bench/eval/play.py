"""Play generated conversations through a real daemon, as a host would, then ask.

Why a real daemon: recall quality depends on everything between the host and the
block (archiving at the trigger, sentence-boundary folders, heuristic scoring, query
analysis, selection in whatever ``recall.mode``, block trimming and persistence), so the
benchmark drives
the daemon over its real socket with the host simulator (`rofmd.host.hostsim.HostSim`), and
looks at nothing but what a host sees (answers, sections) and what is on disk.

For every turn: ``user_says`` (the inbox: recall runs), then ``assistant_says``, which
sends the pre-step (archiving and its compaction) before the assistant's message. No
model: the user config sets ``scoring.fallback: "always"``, so every archived folder is
scored heuristically (only scored folders are recallable), and ``recall.mode`` when
``--mode`` is given. After the conversation one more pre-step leaves nothing pending.

The host meter. The window is 32 000 tokens. The host measures every surface node
with the daemon's own estimator (one token per CJK character, one per four other
characters, four per message), which keeps English and Chinese comparable, and its
context also holds what the surface does not show: the system prompt and the tool
schemas of an agent host (``host_tokens``, 10 000 by default; the daemon never archives
them). Without that, a few hundred chat turns fit in 32k tokens and little is archived.
Questions whose evidence is still in the live context (not in a scored folder) are not
asked: the model can see it there, recall has nothing to do. Nor is a ``said`` question
(what the assistant said or promised) one of whose words is a judged keyword of its
evidence folder: that kind measures what keywords do not carry.

The questions, two regimes:

* fresh: before each question the session's recall state is reset, black box: the host
  disposes the session (``agent/disposed``), ``<memory>/sessions/<id>/recall-state.json``
  is deleted, and the next pre-step re-reports the window to the reloaded session.
  The question goes to the inbox from a second host view of the same session (so the
  main surface does not grow), and the answer's block must hold exactly this round's
  picks, else the run is broken.
* sequence: the recall state of the end of the conversation is put back, and the
  questions are asked one after another in the same session, each followed by a short
  assistant answer (with its pre-step), as a real conversation does. When those steps
  archive (the questions and answers become folders too), bm25s is rebuilt over the
  scored folders on disk before the next question, so both sides search the same
  folders.

For every question the block is read from the answer's ``dsh-rofm:recall`` section (the
daemon sends every section in every answer; `HostSim` keeps the last text of each), and
`bm25s` gets the same number of folders as the block holds (`bench.eval.baseline`).
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from bench.eval.baseline import Bm25, Folder, read_folders
from bench.eval.check import block_entries, entry_chars, evidence_found
from bench.eval.generate import Conversation, Question
from bench.eval.lexicon import LEXICONS
from engine.archive.tokens import MESSAGE_OVERHEAD, estimate_text_tokens
from engine.config import deep_merge
from engine.keywords import extract_keywords, keyword_matches
from engine.recall.state import peek_state_file
from engine.recall.state_log import log_path
from engine.store import safe_session_id
from rofmd.host.client import RofmdClient, RpcError
from rofmd.host.hostsim import HostSim, Node
from rofmd.host.private_daemon import private_daemon

WINDOW = 32_000
HOST_TOKENS = 10_000
RECALL_SECTION = "dsh-rofm:recall"
TOP_FIXED = 3
QUESTION_GAP_MS = 3 * 60_000
Regime = Literal["fresh", "sequence"]
REGIMES: tuple[Regime, ...] = ("fresh", "sequence")


class EvalError(Exception):
    """The run is broken (not a bad score): no archive, a reset that did not reset, …"""


@functools.lru_cache(maxsize=1024)
def _text_tokens(text: str) -> int:
    # sections are re-counted before every step; their texts rarely change
    return estimate_text_tokens(text)


def meter(message: dict[str, Any]) -> int:
    """The host's token count of one message (the daemon's estimator, see the docstring)."""
    tokens = MESSAGE_OVERHEAD
    for block in message.get("content", []):
        if isinstance(block, dict):
            for key in ("text", "arguments"):
                value = block.get(key)
                if isinstance(value, str):
                    tokens += estimate_text_tokens(value)
    return tokens


@dataclass
class MeteredHost(HostSim):
    """`HostSim` with the meter described in the module docstring."""

    host_tokens: int = 0

    def add(
        self, node_type: str, message: dict[str, Any], time_ms: int, *, seq: int | None = None
    ) -> Node:
        node = super().add(node_type, message, time_ms, seq=seq)
        node.tokens = meter(message)
        return node

    def total_tokens(self) -> int:
        sections = sum(_text_tokens(t) for t in self.sections.values())
        return sum(n.tokens for n in self.surface) + sections + self.host_tokens


@dataclass(frozen=True, slots=True)
class Options:
    """How the daemon is configured and how the host behaves."""

    window: int = WINDOW
    host_tokens: int = HOST_TOKENS
    mode: str | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Answer:
    """One question in one regime: what rofmd's block and bm25s held."""

    question: str
    kind: str
    regime: Regime
    evidence: int
    found: int
    entries: int
    recalled: int
    block_chars: int
    entry_chars: int
    identical: bool
    bm25_found: int
    bm25_chars: int
    top3_found: int
    block_ids: tuple[str, ...] = ()
    """Diagnostics: the folders in the block (the recall state's ids), the folders
    holding the evidence, the folders bm25s returned."""
    evidence_ids: tuple[str, ...] = ()
    bm25_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The row as JSON."""
        return {
            "question": self.question,
            "kind": self.kind,
            "regime": self.regime,
            "evidence": self.evidence,
            "found": self.found,
            "entries": self.entries,
            "recalled": self.recalled,
            "blockChars": self.block_chars,
            "entryChars": self.entry_chars,
            "identicalBlock": self.identical,
            "bm25Found": self.bm25_found,
            "bm25Chars": self.bm25_chars,
            "top3Found": self.top3_found,
            "blockIds": list(self.block_ids),
            "evidenceIds": list(self.evidence_ids),
            "bm25Ids": list(self.bm25_ids),
        }


@dataclass
class ConversationRun:
    """What happened to one conversation."""

    conv: Conversation
    folders: int = 0
    scored: int = 0
    archived_messages: int = 0
    archives: int = 0
    asked: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    question_archives: int = 0
    played: tuple[str, ...] = ()
    """The scored folders when the conversation was played (before any question)."""
    seconds: float = 0.0
    answers: list[Answer] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The run as JSON (the conversation's facts and questions included)."""
        return {
            "conversation": self.conv.to_json(),
            "messages": len(self.conv.messages()),
            "archives": self.archives,
            "folders": self.folders,
            "scoredFolders": self.scored,
            "archivedMessages": self.archived_messages,
            "asked": self.asked,
            "skipped": dict(self.skipped),
            "archivesWhileAsking": self.question_archives,
            "playedFolders": list(self.played),
            "seconds": round(self.seconds, 2),
            "answers": [a.to_json() for a in self.answers],
        }


def _counts(surfaces: tuple[str, ...], texts: list[str]) -> int:
    return sum(1 for s in surfaces if any(evidence_found(t, s) for t in texts))


def _answer(
    q: Question,
    regime: Regime,
    block: str,
    recalled: int,
    identical: bool,
    bm25: Bm25,
    block_ids: tuple[str, ...],
) -> Answer:
    n = block_entries(block)
    matched = bm25.top(q.text, n)
    top3 = bm25.top(q.text, TOP_FIXED)
    return Answer(
        question=q.id,
        kind=q.kind,
        regime=regime,
        evidence=len(q.surfaces),
        found=_counts(q.surfaces, [block]),
        entries=n,
        recalled=recalled,
        block_chars=len(block),
        entry_chars=entry_chars(block),
        identical=identical,
        bm25_found=_counts(q.surfaces, [f.text for f in matched]),
        bm25_chars=sum(len(f.text) for f in matched),
        top3_found=_counts(q.surfaces, [f.text for f in top3]),
        block_ids=block_ids,
        evidence_ids=tuple(
            f.id for f in bm25.folders if any(evidence_found(f.text, s) for s in q.surfaces)
        ),
        bm25_ids=tuple(f.id for f in matched),
    )


def _in_judged_keywords(q: Question, folders: list[Folder]) -> bool:
    """Whether a word of the question hits a judged keyword of a folder holding its
    evidence (the ``said`` kind is about what keywords miss)."""
    words = extract_keywords(q.text)
    return any(
        any(evidence_found(f.text, s) for s in q.surfaces)
        and any(keyword_matches(w, k) for w in words for k in f.keywords)
        for f in folders
    )


def _user_message(message_id: str, text: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


class _Player:
    """One conversation against the daemon."""

    def __init__(
        self, client: RofmdClient, conv: Conversation, memory_root: Path, opts: Options
    ) -> None:
        self.client = client
        self.conv = conv
        self.opts = opts
        self.session = {"id": f"eval-{conv.id}"}
        self.sim = MeteredHost(client, self.session, opts.window, host_tokens=opts.host_tokens)
        self.dir = memory_root / "sessions" / safe_session_id(self.session["id"])
        self.run = ConversationRun(conv)

    def _host(self) -> MeteredHost:
        return MeteredHost(
            self.client, self.session, self.opts.window, host_tokens=self.opts.host_tokens
        )

    async def play(self) -> list[Folder]:
        for session in self.conv.sessions:
            for turn in session.turns:
                await self.sim.user_says(turn.user.text, turn.user.time_ms)
                await self.sim.assistant_says(turn.assistant.text, turn.assistant.time_ms)
        # one more step: the last archive's folders are scored in its answer
        await self.sim.pre_step(self.conv.last_time_ms() + 60_000)
        self.run.archives = sum(1 for s in self.sim.steps if s.compaction)
        folders = read_folders(self.dir) if self.dir.is_dir() else []
        scored = [f for f in folders if f.scored]
        self.run.folders, self.run.scored = len(folders), len(scored)
        self.run.played = tuple(f.id for f in scored)
        self.run.archived_messages = sum(f.messages for f in folders)
        if not scored:
            raise EvalError(f"{self.conv.id}: no folder was archived and scored")
        return scored

    def _block_ids(self) -> tuple[str, ...]:
        """The folders in the block, from the recall state the round has just saved."""
        # the snapshot and its log (engine.recall.state_log), as the daemon reads them
        return tuple(peek_state_file(self.dir / "recall-state.json").ids())

    def _state_files(self) -> tuple[Path, Path]:
        path = self.dir / "recall-state.json"
        return path, log_path(path)

    def _saved_state(self) -> tuple[bytes | None, bytes | None] | None:
        """The recall-state files as they are now (None: no state yet)."""
        path, log = self._state_files()
        if not path.is_file():
            return None
        return path.read_bytes(), (log.read_bytes() if log.is_file() else None)

    async def _rejoin(
        self, now_ms: int, state: tuple[bytes | None, bytes | None] | None, block: str
    ) -> None:
        """Dispose the session, set its recall-state files, let the next pre-step reload
        it; the reloaded session must show ``block``."""
        await self.client.notify("agent/disposed", {"session": self.session})
        await self.client.ping(self.session["id"])  # same lane: the disposal has run
        for file, data in zip(self._state_files(), state or (None, None), strict=True):
            if data is None:
                file.unlink(missing_ok=True)
            else:
                file.write_bytes(data)
        step = await self.sim.pre_step(now_ms)
        if step.compaction:
            raise EvalError(f"{self.conv.id}: a replayed pre-step archived again")
        if self.sim.sections.get(RECALL_SECTION, "") != block:
            raise EvalError(f"{self.conv.id}: the reloaded session shows another recall block")

    async def ask(self, questions: list[Question], bm25: Bm25, start_ms: int) -> None:
        saved = self._saved_state()
        saved_block = self.sim.sections.get(RECALL_SECTION, "")
        now = start_ms
        for q in questions:
            await self._rejoin(now, None, "")
            side = self._host()
            answer = await side.user_message(_user_message(f"{q.id}-fresh", q.text), now)
            block = side.sections.get(RECALL_SECTION, "")
            recalled = len(answer.get("recalled", []))
            if block_entries(block) != recalled:
                raise EvalError(
                    f"{q.id}: fresh block holds {block_entries(block)} memories, "
                    f"the round recalled {recalled}: the reset did not reset"
                )
            self.run.answers.append(
                _answer(q, "fresh", block, recalled, False, bm25, self._block_ids())
            )
            now += QUESTION_GAP_MS
        await self._rejoin(now, saved, saved_block)
        previous = self.sim.sections.get(RECALL_SECTION, "")
        replies = LEXICONS[self.conv.lang].answers
        prefix = LEXICONS[self.conv.lang].prefix.format(name=self.conv.friend)
        rebuild = False
        for i, q in enumerate(questions):
            if rebuild:
                # the conversation archived its own questions and answers: bm25s searches
                # the folders the daemon can recall from now, not the ones before
                bm25 = Bm25([f for f in read_folders(self.dir) if f.scored], self.conv.lang)
                rebuild = False
            answer = await self.sim.user_says(q.text, now)
            block = self.sim.sections.get(RECALL_SECTION, "")
            recalled = len(answer.get("recalled", []))
            self.run.answers.append(
                _answer(q, "sequence", block, recalled, block == previous, bm25, self._block_ids())
            )
            previous = block
            step = await self.sim.assistant_says(prefix + replies[i % len(replies)], now + 30_000)
            if step.compaction:
                self.run.question_archives += 1
                rebuild = True
            now += QUESTION_GAP_MS


async def play_conversation(
    client: RofmdClient, conv: Conversation, memory_root: Path, opts: Options
) -> ConversationRun:
    """Play ``conv``, ask its questions in both regimes, compare with bm25s."""
    started = time.monotonic()
    player = _Player(client, conv, memory_root, opts)
    scored = await player.play()
    texts = [f.text for f in scored]
    asked: list[Question] = []
    for q in conv.questions:
        if not all(any(evidence_found(t, s) for t in texts) for s in q.surfaces):
            player.run.skipped["evidence in live context"] += 1
        elif q.kind == "said" and _in_judged_keywords(q, scored):
            player.run.skipped["said: its words are judged keywords"] += 1
        else:
            asked.append(q)
    player.run.asked = len(asked)
    await player.ask(asked, Bm25(scored, conv.lang), conv.last_time_ms() + 3_600_000)
    player.run.seconds = time.monotonic() - started
    return player.run


def user_config(mode: str | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The private daemon's user config (see the module docstring), with `extra` merged
    over it as the config layers merge."""
    config: dict[str, Any] = {"scoring": {"fallback": "always"}}
    if mode is not None:
        config["recall"] = {"mode": mode}
    return deep_merge(config, extra) if extra else config


async def play_all(
    conversations: list[Conversation], opts: Options, *, progress: bool = True
) -> list[ConversationRun]:
    """Every conversation through one private daemon (its own socket and memory root)."""
    runs: list[ConversationRun] = []
    # raised after the daemon's task group has closed, so the caller sees it unwrapped
    error: EvalError | RpcError | None = None
    with tempfile.TemporaryDirectory(prefix="rofmd-eval-", dir="/tmp") as tmp:
        work = Path(tmp)
        (work / "cfg").mkdir()
        (work / "cfg" / "config.json").write_bytes(
            orjson.dumps(user_config(opts.mode, opts.config))
        )
        async with (
            private_daemon(work) as settings,
            RofmdClient.connect(settings.socket_path) as client,
        ):
            await client.initialize(host={"name": "rofmd-eval", "version": "1"})
            memory_root = settings.memory_root or work / "memory"
            for i, conv in enumerate(conversations, 1):
                try:
                    run = await play_conversation(client, conv, memory_root, opts)
                except (EvalError, RpcError) as exc:
                    error = exc
                    break
                runs.append(run)
                if progress:
                    print(
                        f"[{i}/{len(conversations)}] {conv.id}: {len(conv.messages())} messages,"
                        f" {run.archives} archives, {run.folders} folders ({run.scored} scored,"
                        f" {run.archived_messages} messages archived), {run.asked}/"
                        f"{len(conv.questions)} questions asked, {run.seconds:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
    if error is not None:
        raise error
    return runs
