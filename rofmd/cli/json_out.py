"""`--json` output of the commands: the layout of every JSON file on disk
(`engine.jsonio.dumps_json`: orjson, 2-space indent, final line feed), so a script reads
a command's answer and a file the same way. The light commands that must not import
orjson (`rofmd status` and its kin, `rofmd.cli.main`) print with the standard library
instead, in the same layout."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from engine.jsonio import dumps_json

__all__ = ["print_json"]


def print_json(obj: Any, out: TextIO | None = None) -> None:
    """Write `obj` as indented JSON to `out` (standard output by default)."""
    (sys.stdout if out is None else out).write(dumps_json(obj).decode())
