"""Protocol fuzzer: random frames against a real daemon on a real socket (issue 18).

Every frame is answered with a result or with an error other than -32603, and the
daemon never dies. The generator is deterministic (seeded `random.Random`): valid
method names with mutated params (huge, negative, fractional, boolean and
out-of-64-bit numbers, deep nesting, long strings, wrong types, missing fields),
batches, notifications, cancellations and garbage lines. Pre-steps are built to
archive, and the tokens and folder ids they answer with feed `archive/commit`,
`archive/abort` and `memory_judge`, so mutated values reach the commit paths.

CI runs `ROFMD_FUZZ_FRAMES` frames (default 3,000, well under 60 s);
`ROFMD_FUZZ_FRAMES=100000` is the long run, `ROFMD_FUZZ_SEED` picks the seed.
A failure lists the offending frames (shortened) with the daemon's answer.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import re
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.archive_fixtures import Surface
from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon, short_tmpdir

FRAMES = int(os.environ.get("ROFMD_FUZZ_FRAMES", "3000"))
SEED = int(os.environ.get("ROFMD_FUZZ_SEED", "18"))
MAX_LINE = 4 * 1024 * 1024
"""The daemon's line limit in this test: generated frames always stay below it."""
ANSWER_TIMEOUT = float(os.environ.get("ROFMD_FUZZ_ANSWER_TIMEOUT", "20"))
FULL_CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}
SESSIONS = ("fz-a", "fz-b", "fz-c", "fz-d")
ROTATE_EVERY = 2_000
"""Frames per generation of session ids: a session's store stays the size of a real one."""
INTERNAL_ERROR = -32603


# ---- raw JSON pieces -------------------------------------------------------------------


class Raw:
    """A JSON text spliced in verbatim (numbers json.dumps cannot spell, deep nesting)."""

    _n = 0

    def __init__(self, text: str) -> None:
        Raw._n += 1
        self.text = text
        self.mark = f"\x01raw{Raw._n}\x01"


def dumps(value: Any) -> bytes:
    """Serialise with stdlib json (big ints, lone surrogates), then splice `Raw` pieces."""
    raws: dict[str, str] = {}

    def default(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws[obj.mark] = obj.text
            return obj.mark
        raise TypeError(type(obj))

    text = json.dumps(value, default=default, ensure_ascii=False, allow_nan=True)
    if raws:
        text = _RAW_MARK.sub(lambda m: raws[json.loads(m[0])], text)
    return text.encode("utf-8", "surrogatepass")


_RAW_MARK = re.compile(r'"\\u0001raw\d+\\u0001"')


def deep_array(n: int) -> Raw:
    return Raw("[" * n + "1" + "]" * n)


def deep_object(n: int) -> Raw:
    return Raw('{"a":' * n + "1" + "}" * n)


NUMBERS: list[Any] = [
    Raw("1e300"),
    Raw("-1e300"),
    Raw("1e308"),
    Raw("1E+20"),
    Raw("123456789012345678901234567890"),
    Raw("-123456789012345678901234567890"),
    Raw("18446744073709551615"),
    Raw("18446744073709551616"),
    Raw("-9223372036854775808"),
    Raw("-0"),
    Raw("1e400"),  # not a double: a parse error
    2**53,
    2**53 - 1,
    2**63 - 1,
    2**63,
    -(2**31),
    -1,
    0,
    1,
    7,
    1.5,
    -0.5,
    0.1,
    1e-300,
    4e15,
    253402300799999,
    float("nan"),  # json.dumps spells NaN: a parse error
    float("inf"),
]
STRINGS: list[str] = [
    "",
    " ",
    "x",
    "mem-20250101T000000Z-0001",
    "arc-0",
    "..",
    ".",
    "../../etc/passwd",
    "/tmp",
    "a/b\\c",
    "\u0000",
    "😀" * 50,
    "\ud800",  # a lone surrogate: invalid UTF-8 on the wire
    "记忆" * 200,
    "1e300",
    "true",
    "null",
    "{}",
    "[]",
    '{"updates":[]}',
]


SMALL: list[Any] = [None, True, False, [], {}, [None], {"": None}, [[]], {"k": {}}]


def long_string(rng: random.Random) -> str:
    return rng.choice("ab记😀 ") * rng.choice((1_000, 5_000, 70_000, 300_000))


def evil(rng: random.Random) -> Any:
    """One hostile JSON value."""
    roll = rng.random()
    if roll < 0.40:
        return rng.choice(NUMBERS)
    if roll < 0.60:
        return rng.choice(STRINGS)
    if roll < 0.65:
        return long_string(rng)
    if roll < 0.75:
        n = rng.choice((10, 62, 63, 64, 65, 100, 200, 254, 255, 256, 300, 600, 1100))
        return deep_array(n) if rng.random() < 0.5 else deep_object(n)
    if roll < 0.80:
        return [rng.choice(NUMBERS) for _ in range(rng.choice((0, 1, 3, 1000, 20_000)))]
    return copy.deepcopy(rng.choice(SMALL))


# ---- valid params ----------------------------------------------------------------------


@dataclass
class Pool:
    """What earlier answers revealed: archive tokens and folder ids per session."""

    tokens: dict[str, list[str]] = field(default_factory=dict)
    folders: dict[str, list[str]] = field(default_factory=dict)
    image: str = ""
    sessions: list[str] = field(default_factory=lambda: list(SESSIONS))

    def rotate(self, generation: int) -> None:
        self.sessions = [f"{sid}-{generation}" for sid in SESSIONS]
        self.tokens.clear()
        self.folders.clear()

    def learn(self, sid: str, result: Any) -> None:
        comp = result.get("compaction") if isinstance(result, dict) else None
        if isinstance(comp, dict):
            self.tokens.setdefault(sid, []).append(comp["token"])
            self.folders.setdefault(sid, []).extend(comp["folders"])
            del self.tokens[sid][:-20]
            del self.folders[sid][:-200]


def session(rng: random.Random, pool: Pool) -> dict[str, Any]:
    out: dict[str, Any] = {"id": rng.choice(pool.sessions)}
    if rng.random() < 0.2:
        out.update({"origin": "user", "delegationDepth": 0, "agentPreset": "default"})
        out["cwd"] = "/home/u/proj"
    return out


def surface(rng: random.Random, pool: Pool) -> Surface:
    s = Surface()
    s.seq = rng.choice((0, 0, 0, 5, 1000, 10**12))
    s.system()
    if rng.random() < 0.3:
        s.checkpoint("[memory] 3 段更早的对话已归档到 memory/")
    for i in range(rng.randint(2, 14)):
        if rng.random() < 0.15:
            att: dict[str, Any] = {
                "attachmentId": f"att-{i}",
                "mediaType": rng.choice(("image/png", "image/jpeg", "application/x")),
                "bytes": 12,
                "width": 3,
                "height": 4,
                "name": "shot.png",
            }
            if rng.random() < 0.6:
                att["hostPath"] = pool.image if rng.random() < 0.7 else "/nonexistent/x.png"
            s.user(f"看看第{i}张截图", images=[att])
        s.turn_pair(i, rng.choice((20, 100, 300, 800)))
        if rng.random() < 0.1:
            s.pinned("subagent-settled", "子任务完成")
    return s


def pre_step(rng: random.Random, pool: Pool) -> dict[str, Any]:
    """A pre-step whose context sits at 40-99 % of a window of at least 40,000 tokens."""
    p = pre_step_for(surface(rng, pool), rng.choice((40, 80, 90, 99)))
    p["session"] = session(rng, pool)
    p["step"] = rng.randrange(1, 5)
    return p


def pre_step_for(s: Surface, percent: int, sid: str = "fz-a") -> dict[str, Any]:
    """Pre-step params of `s` at `percent` of a window of at least 40,000 tokens."""
    sizes = [len(dumps(n["message"])) // 3 + 4 for n in s.nodes]  # a rough token count
    total = sum(sizes)
    window = max(40_000, total * 100 // percent)
    k = window * percent / 100 / total
    nodes = [
        {"seq": n["seq"], "tokens": max(1, int(t * k))} for n, t in zip(s.nodes, sizes, strict=True)
    ]
    return {
        "session": {"id": sid},
        "turn": s.turn,
        "step": 1,
        "messages": [],
        "context": {
            "totalTokens": sum(n["tokens"] for n in nodes),
            "contextWindow": window,
            "nodes": nodes,
        },
        "surface": s.nodes,
    }


def inbox(rng: random.Random, pool: Pool) -> dict[str, Any]:
    words = ["配置文件", "截图", "问题", "回答", "memory", "config", "turn"]
    text = "我们之前说过" + "".join(rng.sample(words, 3)) + "吗？"
    return {
        "session": session(rng, pool),
        "message": {
            "id": f"u-{rng.randrange(10**9)}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "time": 1_791_311_000_000 + rng.randrange(10**9),
        "turn": rng.randrange(1, 40),
        "contextWindow": 131072,
    }


def judge(rng: random.Random, pool: Pool) -> dict[str, Any]:
    sid = rng.choice(pool.sessions)
    folders = pool.folders.get(sid) or ["mem-20250101T000000Z-0001"]
    updates = [
        {
            "id": rng.choice(folders),
            "alpha": rng.choice((0.1, 0.5, 0.9)),
            "beta": rng.choice((-3, 0, 4.5)),
            "keywords": rng.sample(["配置", "文件", "截图", "问题", "回答", "工具", "路径"], 4),
            "events": ["检查配置"],
            "event": "检查配置",
            "persons": ["用户"],
            "locations": [],
            "keep": rng.random() < 0.2,
            "reason": "用户的配置问题",
        }
        for _ in range(rng.randint(1, 3))
    ]
    arguments: Any = {"updates": updates}
    roll = rng.random()
    if roll < 0.15:
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif roll < 0.25:
        arguments = {"updates": json.dumps(updates, ensure_ascii=False)}
    return {
        "session": {"id": sid},
        "turn": rng.randrange(1, 40),
        "callId": f"call-{rng.randrange(10**6)}",
        "name": "memory_judge",
        "arguments": arguments,
    }


def commit(rng: random.Random, pool: Pool) -> dict[str, Any]:
    sid = rng.choice(pool.sessions)
    tokens = pool.tokens.get(sid) or ["arc-unknown"]
    return {"session": {"id": sid}, "token": rng.choice(tokens)}


def abort(rng: random.Random, pool: Pool) -> dict[str, Any]:
    return commit(rng, pool) | {"reason": rng.choice(("host refused", "E_APPEND", ""))}


def initialize(rng: random.Random, pool: Pool) -> dict[str, Any]:
    return {
        "protocolVersion": 1,
        "host": {"name": "dsh", "version": "0.2.1"},
        "capabilities": dict(FULL_CAPS),
    }


Builder = Callable[[random.Random, Pool], dict[str, Any]]
METHODS: list[tuple[str, float, Builder]] = [
    ("agent/pre-step", 0.34, pre_step),
    ("tools/call", 0.14, judge),
    ("agent/inbox/inserted", 0.12, inbox),
    ("archive/commit", 0.06, commit),
    ("archive/abort", 0.06, abort),
    ("prompt/sections", 0.05, lambda rng, pool: {"session": session(rng, pool)}),
    ("agent/disposed", 0.04, lambda rng, pool: {"session": session(rng, pool)}),
    ("initialize", 0.05, initialize),
    ("ping", 0.04, lambda rng, pool: {"session": session(rng, pool)} if rng.random() < 0.5 else {}),
    ("status", 0.03, lambda rng, pool: {}),
    ("debug/sleep", 0.02, lambda rng, pool: {"ms": rng.choice((0, 1))}),
    ("config/reload", 0.005, lambda rng, pool: {}),
    ("no/such-method", 0.015, lambda rng, pool: {"session": session(rng, pool)}),
]


# ---- mutation --------------------------------------------------------------------------


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) below `value`, the root included."""
    yield prefix, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def mutate(rng: random.Random, params: Any) -> Any:
    """Replace, delete, wrap or add at one random path; numbers are picked more often."""
    every = list(paths(params))
    numeric = [p for p in every if isinstance(p[1], int | float) and not isinstance(p[1], bool)]
    path, value = rng.choice(numeric if numeric and rng.random() < 0.5 else every)
    if not path:
        return evil(rng)
    parent: Any = params
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    roll = rng.random()
    if roll < 0.70:
        parent[last] = evil(rng)
    elif roll < 0.82 and isinstance(parent, dict):
        del parent[last]
    elif roll < 0.88:
        parent[last] = [value]
    elif roll < 0.92 and isinstance(value, int | float) and not isinstance(value, bool):
        parent[last] = str(value)
    elif isinstance(value, dict):
        value[rng.choice(("extra", "seq", "time", "turn", "type", "tokens"))] = evil(rng)
    else:
        parent[last] = evil(rng)
    return params


# ---- frames ----------------------------------------------------------------------------


@dataclass
class Frame:
    """One line to send and the request ids that must be answered."""

    line: bytes
    ids: set[str]
    method: str = ""
    session: str | None = None


class Generator:
    """Deterministic frames from one seed."""

    def __init__(self, seed: int, pool: Pool) -> None:
        self.rng = random.Random(seed)
        self.pool = pool
        self.n = 0
        self.frames = 0
        self.recent: list[str] = []

    def _id(self) -> str:
        self.n += 1
        return f"f{self.n}"

    def _member(self, *, force_id: bool = False) -> tuple[Any, str | None, str]:
        rng = self.rng
        weights = [m[1] for m in METHODS]
        name, _, build = METHODS[rng.choices(range(len(METHODS)), weights)[0]]
        params: Any = build(rng, self.pool)
        for _ in range(rng.choices((0, 1, 2, 3), (0.25, 0.45, 0.2, 0.1))[0]):
            params = mutate(rng, params)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": name}
        if params is not None or rng.random() < 0.9:
            msg["params"] = params
        rid: str | None = None
        if force_id or rng.random() < 0.9:
            rid = self._id()
            msg["id"] = rid
            self.recent.append(rid)
            del self.recent[:-20]
        return msg, rid, name

    def _garbage(self) -> tuple[bytes, bool]:
        """(line, answered): answered lines get one answer whose id is null."""
        rng = self.rng
        choice = rng.randrange(12)
        if choice == 0:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))), True
        if choice == 1:
            whole = dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
            return whole[: rng.randrange(1, len(whole))], True
        if choice == 2:
            return dumps(rng.choice([1, "x", None, True, 1.5, {"a": 1}])), True
        if choice == 3:
            return deep_array(rng.choice((300, 1023, 1100))).text.encode(), True
        if choice == 4:
            return b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}', True
        if choice == 5:
            return dumps({"jsonrpc": "2.0", "id": evil(rng), "method": "ping"}), True
        if choice == 6:
            return dumps({"jsonrpc": "1.0", "id": None, "method": "ping"}), True
        if choice == 7:
            return dumps({"jsonrpc": "2.0", "id": None, "method": evil(rng)}), True
        if choice == 8:
            return dumps({"jsonrpc": "2.0", "id": None, "method": "ping", "params": 5}), True
        if choice == 9:
            return b"[]", True
        if choice == 10:
            return b"   \t ", False
        return b'{"jsonrpc":"2.0","id":null,"method":"pi\\ud800ng"}', True

    def frame(self) -> Frame:
        self.frames += 1
        if self.frames % ROTATE_EVERY == 0:
            self.pool.rotate(self.frames // ROTATE_EVERY)
        frame = self._frame()
        try:
            orjson.loads(frame.line)
        except orjson.JSONDecodeError:
            frame.ids = set()  # a parse error: one answer, its id null
        return frame

    def _frame(self) -> Frame:
        rng = self.rng
        roll = rng.random()
        if roll < 0.06:
            line, _ = self._garbage()
            return Frame(line, set(), "garbage")
        if roll < 0.10:
            target = rng.choice(self.recent) if self.recent and rng.random() < 0.7 else evil(rng)
            msg: dict[str, Any] = {
                "jsonrpc": "2.0",
                "method": "$/cancelRequest",
                "params": {"id": target},
            }
            return Frame(dumps(msg), set(), "$/cancelRequest")
        if roll < 0.16:
            members: list[Any] = []
            ids: set[str] = set()
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.2:
                    members.append(evil(rng))
                    continue
                m, rid, _ = self._member()
                members.append(m)
                if rid is not None:
                    ids.add(rid)
            return Frame(dumps(members), ids, "batch")
        msg, rid, name = self._member()
        sid = None
        params = msg.get("params")
        if isinstance(params, dict) and isinstance(params.get("session"), dict):
            raw = params["session"].get("id")
            sid = raw if isinstance(raw, str) else None
        return Frame(dumps(msg), {rid} if rid else set(), name, sid)


# ---- the run ---------------------------------------------------------------------------


@dataclass
class Report:
    frames: int = 0
    answers: int = 0
    deaths: int = 0
    internal: int = 0
    hangs: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)
    archives: int = 0
    failures: list[str] = field(default_factory=list)

    def note(self, kind: str, frame: Frame, detail: Any) -> None:
        if len(self.failures) < 20:
            line = frame.line.decode("utf-8", "replace")
            short = line if len(line) < 1500 else line[:700] + " … " + line[-700:]
            self.failures.append(f"{kind}: {str(detail)[-1200:]}\n  frame: {short}")

    def summary(self) -> str:
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(self.codes.items()))
        results = ", ".join(f"{k}: {v}" for k, v in sorted(self.results.items()))
        return (
            f"frames {self.frames}, answers {self.answers}, deaths {self.deaths},"
            f" -32603 {self.internal}, hangs {self.hangs}; errors {{{codes}}};"
            f" results {{{results}}}; archives {self.archives}"
        )


class Peer:
    """The fuzzer's connection; reconnects (and restarts a dead daemon)."""

    def __init__(self, stack: contextlib.ExitStack, base: Path) -> None:
        self.stack = stack
        self.base = base
        self.daemon: DaemonProcess = self._start()
        self.sock = self._connect()

    def _start(self) -> DaemonProcess:
        env = {"ROFMD_MAX_MESSAGE_BYTES": str(MAX_LINE), "ROFMD_REQUEST_TIMEOUT": "30"}
        return self.stack.enter_context(running_daemon(base=self.base, env=env))

    def _connect(self) -> LineSocket:
        sock = LineSocket(self.daemon.socket_path, timeout=ANSWER_TIMEOUT)
        sock.send(
            dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": initialize(random.Random(0), Pool()),
                }
            )
            + b"\n"
        )
        while True:
            line = sock.recv_line()
            assert line is not None, "daemon closed the connection during initialize"
            if orjson.loads(line).get("id") == "init":
                return sock

    def alive(self) -> bool:
        return self.daemon.proc.poll() is None

    def recover(self) -> bool:
        """Reconnect; restart the daemon when it died. True when it had died."""
        with contextlib.suppress(OSError):
            self.sock.close()
        died = not self.alive()
        if died:
            self.daemon = self._start()
        self.sock = self._connect()
        return died


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _logged(daemon: DaemonProcess, err: dict[str, Any]) -> Any:
    """The daemon's log record of an internal error (its traceback), else the error."""
    data = err.get("data")
    error_id = data.get("errorId") if isinstance(data, dict) else None
    for rec in reversed(daemon.log_records()):
        if error_id is not None and rec.get("error_id") == error_id:
            return str(rec.get("exception", rec))[-1200:]
    return err


def _responses(line: bytes) -> list[Any]:
    value = orjson.loads(line)
    return value if isinstance(value, list) else [value]


def run_fuzz(frames: int, seed: int) -> Report:
    report = Report()
    base = short_tmpdir()
    pool = Pool()
    pool.image = str(base / "shot.png")
    Path(pool.image).write_bytes(b"\x89PNG\r\n\x1a\nfake")
    gen = Generator(seed, pool)
    sentinel = 0
    with contextlib.ExitStack() as stack:
        peer = Peer(stack, base)
        deadline_each = ANSWER_TIMEOUT
        for _ in range(frames):
            frame = gen.frame()
            report.frames += 1
            want = set(frame.ids)
            line = frame.line + b"\n"
            if not want:
                sentinel += 1
                sid = f"s{sentinel}"
                want.add(sid)
                # a sentinel ping in the same session queues behind the frame's work
                ping: dict[str, Any] = {"jsonrpc": "2.0", "id": sid, "method": "ping"}
                if frame.session is not None and _encodable(frame.session):
                    ping["params"] = {"session": {"id": frame.session}}
                line += dumps(ping) + b"\n"
            started = time.monotonic()
            try:
                peer.sock.send(line)
                while want:
                    raw = peer.sock.recv_line()
                    if raw is None:
                        raise ConnectionError("connection closed")
                    for resp in _responses(raw):
                        report.answers += 1
                        rid = resp.get("id")
                        want.discard(rid)
                        err = resp.get("error")
                        if err is not None:
                            code = err.get("code")
                            report.codes[code] = report.codes.get(code, 0) + 1
                            if code == INTERNAL_ERROR:
                                report.internal += 1
                                report.note("-32603", frame, _logged(peer.daemon, err))
                        elif "result" not in resp:
                            report.note("no result or error", frame, resp)
                        else:
                            result = resp["result"]
                            method = frame.method if rid in frame.ids else "other"
                            report.results[method] = report.results.get(method, 0) + 1
                            if isinstance(result, dict) and result.get("compaction"):
                                report.archives += 1
                                if frame.session:
                                    pool.learn(frame.session, result)
                    if time.monotonic() - started > deadline_each:
                        raise TimeoutError
            except (OSError, ConnectionError, TimeoutError) as exc:
                if isinstance(exc, TimeoutError | socket.timeout) and peer.alive():
                    report.hangs += 1
                    report.note("hang", frame, str(exc))
                elif not peer.alive():
                    report.deaths += 1
                    report.note("death", frame, peer.daemon.log_text()[-1500:])
                else:
                    report.note("closed", frame, str(exc))
                peer.recover()
        assert peer.alive()
        assert peer.sock.call("end", "ping") == {
            "jsonrpc": "2.0",
            "id": "end",
            "result": {"pong": True},
        }
        peer.sock.close()
    shutil.rmtree(base, ignore_errors=True)
    return report


@pytest.mark.timeout(max(120, FRAMES // 20))
def test_fuzzed_frames_never_kill_the_daemon_nor_answer_internal_errors() -> None:
    started = time.monotonic()
    report = run_fuzz(FRAMES, SEED)
    elapsed = time.monotonic() - started
    print(f"\nfuzz seed {SEED}: {report.summary()} in {elapsed:.1f} s")
    problems = "\n".join(report.failures)
    assert report.deaths == 0 and report.internal == 0 and report.hangs == 0, (
        f"{report.summary()}\n{problems}"
    )
    assert not report.failures, problems
    # the generator reached the paths it is for
    assert report.codes.get(-32602, 0) > FRAMES // 20
    assert report.codes.get(-32700, 0) > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_short_runs_of_other_seeds(seed: int) -> None:
    report = run_fuzz(min(FRAMES, 300), seed)
    assert report.deaths == 0 and report.internal == 0 and report.hangs == 0, (
        f"{report.summary()}\n" + "\n".join(report.failures)
    )


# ---- the minimal cases of the issue, pinned ---------------------------------------------


@pytest.fixture(scope="module")
def pinned_daemon() -> Iterator[DaemonProcess]:
    """One daemon for the pinned cases: each uses a session of its own and checks that
    what it sends wrote nothing anywhere under the memory root."""
    with running_daemon() as d:
        yield d


def _folders(d: DaemonProcess) -> set[Path]:
    return set((d.memory_root / "sessions").glob("*/mem-*"))


def archiving_pre_step(sid: str) -> dict[str, Any]:
    s = Surface()
    s.system()
    for i in range(12):
        s.turn_pair(i, 300)
    return pre_step_for(s, 95, sid)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("surface", 3, "seq"), Raw("1e300")),
        (("surface", 3, "time"), Raw("1e300")),
        (("surface", 3, "turn"), Raw("18446744073709551615")),
        (("context", "nodes", 3, "seq"), Raw("1e300")),
        (("context", "nodes", 3, "tokens"), Raw("-1e300")),
        (("surface", 2, "message", "content", 2, "arguments"), deep_array(300)),
        (("surface", 2, "message", "extra"), deep_object(600)),
    ],
)
def test_minimal_frames_are_field_errors_and_write_nothing(
    pinned_daemon: DaemonProcess, path: tuple[Any, ...], value: Any
) -> None:
    d = pinned_daemon
    sid = "minimal-" + "-".join(map(str, path))  # a fresh session for each case
    c = LineSocket(d.socket_path)
    c.call(0, "initialize", {"protocolVersion": 1, "capabilities": FULL_CAPS})
    before = _folders(d)  # the other cases' folders: all answered, so all written
    assert not list((d.memory_root / "sessions" / sid).glob("mem-*"))
    p = archiving_pre_step(sid)
    target: Any = p
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    c.send(dumps({"jsonrpc": "2.0", "id": 1, "method": "agent/pre-step", "params": p}) + b"\n")
    err = c.recv_json()["error"]
    assert err["code"] == -32602, err
    fields = [e["field"] for e in err["data"]["errors"]]
    assert len(fields) == 1 and fields[0].startswith(".".join(map(str, path))), fields
    assert _folders(d) == before
    # the same pre-step with a good value archives
    good = archiving_pre_step(sid)
    res = c.call(2, "agent/pre-step", good)["result"]
    assert res["compaction"] is not None
    assert d.proc.poll() is None
    c.close()


def test_judge_updates_that_only_a_lax_parser_reads_are_a_tool_error(
    pinned_daemon: DaemonProcess,
) -> None:
    d = pinned_daemon
    c = LineSocket(d.socket_path)
    c.call(0, "initialize", {"protocolVersion": 1, "capabilities": FULL_CAPS})
    comp = c.call(1, "agent/pre-step", archiving_pre_step("judge"))["result"]["compaction"]
    fid = comp["folders"][0]
    for i, updates in enumerate(
        [
            f'[{{"id": "{fid}", "alpha": {"9" * 400}}}]',
            f'[{{"id": "{fid}", "alpha": NaN}}]',
            "[" * 3000 + "]" * 3000,
        ]
    ):
        args = {"updates": updates}
        params = {"session": {"id": "judge"}, "name": "memory_judge", "arguments": args}
        res = c.call(10 + i, "tools/call", params)["result"]
        assert res["isError"] is True, res
    assert d.proc.poll() is None
    c.close()
