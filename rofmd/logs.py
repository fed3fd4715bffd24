"""structlog setup: JSON lines for machines, console lines for people.

Request handlers bind `request_id` and `session_id` through contextvars, so every
line logged while a request runs carries them without passing a logger around.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def configure_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog once per process; `auto` picks console on a TTY."""
    out = stream if stream is not None else sys.stdout
    use_json = fmt == "json" or (fmt == "auto" and not out.isatty())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
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
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "rofmd") -> structlog.stdlib.BoundLogger:
    """A bound logger; typed loosely because structlog's proxies are dynamic."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
