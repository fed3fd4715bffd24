"""Reading a tool argument the model gave, and echoing it in a warning.

Every model-facing tool (memory_recall, memory_group_recall, the time parameters) reads
integers and echoes bad values the same way, so the model meets one rule.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["integer_arg", "shown_arg"]


def integer_arg(value: Any) -> int | None:
    """An integer argument: ints, finite numbers (rounded down) and numeric strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, float) and math.isfinite(value):
        return math.floor(value)
    return None


def shown_arg(value: Any) -> str:
    """A given value in a warning (short: it is the model's own input echoed)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
