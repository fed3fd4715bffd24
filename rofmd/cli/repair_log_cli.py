"""`rofmd repair-session-log [--dry-run] [--json] [PATH]`: give every message of a DSH
session log the id DSH requires (reference §6, "历史加载失败").

DSH refuses to load a session log in which one message has no id ("历史加载失败"), and
the session can then neither be continued nor renamed. Early plugin versions wrote such
messages (``source.kind: "rofm-recall"``). This command adds exactly the missing ids and
nothing else:

* every line that needs no id is kept byte for byte; a line that needs one is the same
  event, re-encoded, with ``id`` first in its message (``repaired-<seq>-<digest>``: the
  same for a dry run and the real one);
* a ``.zstd`` log keeps its frame boundaries: frames without a change are copied as
  they are, the others are compressed again as one frame each; a torn final frame (the
  host was writing) is kept as it is;
* before anything is replaced, the original is copied to ``<file>.bak-<UTC timestamp>``;
  the repaired log is written beside it and renamed over the original (atomic, durable);
  a log that changed meanwhile is left alone (stop DSH first);
* a message that also lacks its ``role``, ``source`` or ``content`` is reported for a
  person to fix: nothing is invented;
* ``--dry-run`` reports and writes nothing.

PATH is a log or a directory searched for ``session.v4.jsonl[.zstd]``; by default the
DSH sessions directory (``$DSH_HOME/sessions``, else ``~/.dsh/sessions``). Exit codes: 0
done (or nothing to do), 1 a log could not be read or written, or needs a person.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from rofmd.cli.json_out import print_json

__all__ = ["LOG_NAMES", "add_repair_parser", "cmd_repair", "repair_file", "repair_line"]

LOG_NAMES = ("session.v4.jsonl.zstd", "session.v4.jsonl")
MESSAGE_TYPES = frozenset(
    {"user/message", "system/message", "developer/message", "assistant/message", "tool/result"}
)
REQUIRED = ("role", "source", "content")


@dataclass
class Finding:
    """A message event that lacks something."""

    seq: Any
    type: str
    kind: str | None
    missing: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "kind": self.kind, "missing": self.missing}


@dataclass
class FileReport:
    """What a repair found (and did) in one log."""

    path: Path
    zstd: bool = False
    events: int = 0
    messages: int = 0
    missing_ids: list[Finding] = field(default_factory=list)
    manual: list[Finding] = field(default_factory=list)
    torn: bool = False
    error: str | None = None
    backup: Path | None = None
    repaired: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "zstd": self.zstd,
            "events": self.events,
            "messages": self.messages,
            "missingIds": [f.to_json() for f in self.missing_ids],
            "manual": [f.to_json() for f in self.manual],
            "torn": self.torn,
            "error": self.error,
            "backup": str(self.backup) if self.backup else None,
            "repaired": self.repaired,
        }


def _message(event: dict[str, Any]) -> dict[str, Any] | None:
    """The event's message (engine.passive.events.message_of), as the dict it was parsed
    into: the caller changes or forwards it. Imported here, not at the top: `rofmd.cli.main`
    imports this module to build its parser, and `rofmd status` must not load the engine."""
    from engine.passive.events import message_of

    message = message_of(event)
    return message if isinstance(message, dict) else None


def repair_line(raw: bytes, report: FileReport) -> bytes:
    """The line with its message's id added when it has none (else ``raw`` itself)."""
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if not isinstance(event, dict):
        return raw
    report.events += 1
    etype = event.get("type")
    if etype not in MESSAGE_TYPES:
        return raw
    report.messages += 1
    message = _message(event)
    seq = event.get("seq")
    if message is None:
        report.manual.append(Finding(seq, str(etype), None, ["message"]))
        return raw
    source = message.get("source")
    kind = source.get("kind") if isinstance(source, dict) else None
    missing = [k for k in REQUIRED if message.get(k) is None]
    if missing:
        report.manual.append(Finding(seq, str(etype), kind, missing))
    mid = message.get("id")
    if isinstance(mid, str) and mid:
        return raw
    report.missing_ids.append(Finding(seq, str(etype), kind, ["id"]))
    new_id = f"repaired-{seq}-{hashlib.sha256(raw).hexdigest()[:12]}"
    fixed = {"id": new_id, **{k: v for k, v in message.items() if k != "id"}}
    data = event["data"]
    if etype == "user/message":
        event["data"] = fixed
    else:
        data["message"] = fixed
    return orjson.dumps(event)


def _lines(data: bytes, report: FileReport) -> tuple[bytes, bool]:
    """Every line of ``data`` repaired; whether any changed."""
    out: list[bytes] = []
    changed = False
    for line in data.split(b"\n"):
        new = repair_line(line, report) if line.strip() else line
        changed = changed or new is not line
        out.append(new)
    return b"\n".join(out), changed


def _zstd(
    src: BinaryIO, raw: BinaryIO, out: BinaryIO, report: FileReport, tick: Callable[[int], None]
) -> None:
    import zstandard

    from engine.sessionlog import iter_frames

    cctx = zstandard.ZstdCompressor(level=3)
    for frame in iter_frames(src):
        if frame.end is None:
            # torn (the host was writing) or corrupt: kept as it is
            report.torn = True
            if frame.error is not None:
                report.error = frame.error
            raw.seek(frame.start)
            shutil.copyfileobj(raw, out)
            return
        data, changed = _lines(frame.data, report)
        if changed:
            out.write(cctx.compress(data))
        else:
            raw.seek(frame.start)
            out.write(raw.read(frame.end - frame.start))
        tick(frame.end)


def _plain(src: BinaryIO, out: BinaryIO, report: FileReport, tick: Callable[[int], None]) -> None:
    done = 0
    for line in src:
        done += len(line)
        if not line.endswith(b"\n"):
            report.torn = bool(line.strip())
            out.write(line)  # a partial last line: the host was writing
            break
        body = line[:-1]
        new = repair_line(body, report) if body.strip() else body
        out.write(new + b"\n")
        tick(done)


class _Discard:
    """The output of a dry run."""

    def write(self, data: bytes) -> int:
        return len(data)


def _backup_path(path: Path, now: float) -> Path:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now))
    candidate = path.with_name(f"{path.name}.bak-{stamp}")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return candidate


def _copy_durably(src: Path, dst: Path) -> None:
    from engine.jsonio import fs

    with src.open("rb") as fin, dst.open("xb") as fout:
        shutil.copyfileobj(fin, fout)
        fout.flush()
        os.fsync(fout.fileno())
    shutil.copymode(src, dst)
    fs.fsync_dir(dst.parent)


def repair_file(
    path: Path, *, dry_run: bool, tick: Callable[[int], None] = lambda _n: None
) -> FileReport:
    """Repair (or with ``dry_run`` only inspect) one log; see the module docstring."""
    from engine.jsonio import fs, temp_path
    from engine.sessionlog import is_zstd

    report = FileReport(path)
    try:
        before = path.stat()
        with path.open("rb") as src, path.open("rb") as raw:
            report.zstd = is_zstd(src.read(4))
            src.seek(0)
            if dry_run:
                sink: Any = _Discard()
                _run(src, raw, sink, report, tick)
                return report
            tmp = temp_path(path)
            try:
                with tmp.open("xb") as out:
                    _run(src, raw, out, report, tick)
                    out.flush()
                    os.fsync(out.fileno())
                if not report.missing_ids:
                    return report
                if path.stat().st_size != before.st_size:
                    report.error = "the log changed while it was repaired: stop DSH and run again"
                    return report
                report.backup = _backup_path(path, time.time())
                _copy_durably(path, report.backup)
                shutil.copymode(path, tmp)
                fs.replace(tmp, path)
                fs.fsync_dir(path.parent)
                report.repaired = True
            finally:
                tmp.unlink(missing_ok=True)
    except OSError as exc:
        report.error = f"{exc.strerror or exc}"
    return report


def _run(
    src: BinaryIO, raw: BinaryIO, out: Any, report: FileReport, tick: Callable[[int], None]
) -> None:
    if report.zstd:
        _zstd(src, raw, out, report, tick)
    else:
        _plain(src, out, report, tick)


def find_logs(path: Path) -> Iterator[Path]:
    """``path`` itself, or the session logs under it, sorted."""
    if path.is_dir():
        found = sorted(p for name in LOG_NAMES for p in path.rglob(name) if p.is_file())
        yield from found
    else:
        yield path


def _render(report: FileReport, dry_run: bool) -> list[str]:
    lines: list[str] = []
    ids = report.missing_ids
    head = f"{report.path}: {report.events} events, {report.messages} messages"
    if report.error and not ids:
        return [f"{head}: ERROR {report.error}"]
    if not ids:
        lines.append(f"{head}: every message has an id")
    else:
        seqs = ", ".join(str(f.seq) for f in ids[:10]) + (" …" if len(ids) > 10 else "")
        kinds = ", ".join(sorted({str(f.kind) for f in ids}))
        if dry_run:
            verb = "would add"
        elif report.repaired:
            verb = "added"
        else:
            verb = "NOT added"
        lines.append(
            f"{head}: {verb} {len(ids)} missing message id(s) (seq {seqs}; source {kinds})"
        )
        if report.backup:
            lines.append(f"  backup {report.backup}")
    if report.error:
        lines.append(f"  ERROR {report.error}")
    if report.torn:
        lines.append("  the final frame or line is incomplete (the host was writing): kept as is")
    for f in report.manual:
        lines.append(
            f"  seq {f.seq} ({f.type}) has no {', '.join(f.missing)}: fix it by hand, nothing is invented"
        )
    return lines


def cmd_repair(args: argparse.Namespace) -> int:
    """`rofmd repair-session-log`."""
    from rofmd.cli.progress import Progress

    if args.path is not None:
        root = Path(args.path)
    else:
        from rofmd.server.settings import default_sessions_dir

        root = default_sessions_dir()
    if not root.exists():
        print(f"rofmd repair-session-log: {root}: no such file or directory", file=sys.stderr)
        return 1
    logs = list(find_logs(root))
    total = sum(p.stat().st_size for p in logs if p.exists())
    bar = Progress(sys.stderr, total, "repair-session-log")
    reports: list[FileReport] = []
    done = 0
    for path in logs:
        base = done

        def tick(n: int, base: int = base) -> None:
            bar.update(base + n)

        reports.append(repair_file(path, dry_run=args.dry_run, tick=tick))
        done = base + (path.stat().st_size if path.exists() else 0)
        bar.update(done)
    bar.close()
    failed = any(r.error and not r.torn for r in reports) or any(r.manual for r in reports)
    if args.json:
        doc = {
            "dryRun": args.dry_run,
            "logs": len(reports),
            "missingIds": sum(len(r.missing_ids) for r in reports),
            "repaired": sum(1 for r in reports if r.repaired),
            "manual": sum(len(r.manual) for r in reports),
            "files": [r.to_json() for r in reports],
        }
        print_json(doc)
    else:
        for r in reports:
            print("\n".join(_render(r, args.dry_run)))
        missing = sum(len(r.missing_ids) for r in reports)
        if args.dry_run:
            tail = " (dry run: nothing written)" if missing else ""
            print(f"{len(reports)} log(s), {missing} missing message id(s){tail}")
        else:
            fixed = sum(1 for r in reports if r.repaired)
            print(
                f"{len(reports)} log(s), {missing} missing message id(s), {fixed} log(s) repaired"
            )
    return 1 if failed else 0


def add_repair_parser(sub: Any) -> None:
    """Register `repair-session-log` on the `rofmd` subcommand parser."""
    p = sub.add_parser(
        "repair-session-log",
        help="add missing message ids to DSH session logs (the 历史加载失败 fix)",
        description="Add the message ids a DSH session log lacks (DSH cannot load a log with"
        " a message without one). Keeps every other byte; backs the log up first.",
    )
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="a session.v4.jsonl[.zstd] or a directory of them (default $DSH_HOME/sessions,"
        " else ~/.dsh/sessions)",
    )
    p.add_argument("--dry-run", action="store_true", help="report only; write nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_repair)
