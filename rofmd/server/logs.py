"""structlog setup: JSON lines for machines, console lines for people.

Request handlers bind `request_id` and `session_id` through contextvars, so every
line logged while a request runs carries them without passing a logger around.

Where lines go: debug and info to stdout, warnings and errors to stderr, so a shell
redirect or a supervisor that keeps the two apart sees the problems on their own. Under
systemd (`JOURNAL_STREAM` names the stream) each line starts with its syslog priority
(`<3>` error, `<4>` warning, `<6>` info, `<7>` debug), which journald strips and
records: `journalctl -p err` then finds the errors. JSON lines are written with orjson,
like every other JSON the daemon writes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import orjson
import structlog

__all__ = ["configure_logging", "get_logger", "journal_stream"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_PRIORITY = {
    "debug": 7,
    "info": 6,
    "msg": 6,
    "warning": 4,
    "warn": 4,
    "error": 3,
    "exception": 3,
    "critical": 2,
    "fatal": 2,
}
"""syslog priorities of structlog's method names (sd-daemon(3) prefixes)."""

_TO_STDERR = frozenset({"warning", "warn", "error", "exception", "critical", "fatal"})


def journal_stream(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` is connected to the journal: `JOURNAL_STREAM` is
    `<device>:<inode>` of the stream systemd gave the service (systemd.exec(5))."""
    env = os.environ if environ is None else environ
    value = env.get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isdigit() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or not a real file (StringIO)
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class _RoutedLogger:
    """structlog's final logger: one line per call, to stdout or stderr by level, with
    the journal's priority prefix on a stream that is the journal."""

    def __init__(self, out: TextIO, err: TextIO, environ: Mapping[str, str] | None) -> None:
        self._out = out
        self._err = err
        self._prefix = {id(s): journal_stream(s, environ) for s in (out, err)}

    def _write(self, method: str, message: str) -> None:
        stream = self._err if method in _TO_STDERR else self._out
        if self._prefix[id(stream)]:
            message = f"<{_PRIORITY.get(method, 6)}>{message}"
        print(message, file=stream, flush=True)

    def __getattr__(self, method: str) -> Any:
        if method not in _PRIORITY:
            raise AttributeError(method)
        return lambda message: self._write(method, message)


def _orjson(obj: Any, **_: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


def configure_logging(
    fmt: str = "auto",
    level: str = "info",
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Configure structlog once per process; `auto` picks console on a TTY.

    ``stream``: every line to that one stream (the CLI's own commands log to stderr so
    their stdout stays the command's output); by default stdout and stderr by level.
    """
    out = stream if stream is not None else sys.stdout
    err = stream if stream is not None else sys.stderr
    use_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer(serializer=_orjson)
        if use_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    logger = _RoutedLogger(out, err, environ)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=lambda *args: logger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "rofmd") -> structlog.stdlib.BoundLogger:
    """A bound logger; typed loosely because structlog's proxies are dynamic."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
