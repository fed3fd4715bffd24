"""The three system-prompt sections the daemon owns (PROTOCOL.md §3).

Their texts come from the recall, scoring and rules use cases; until a session
has something to show, a section renders to the empty string, which the bridge
treats as "render nothing".
"""

from __future__ import annotations

from typing import Any

from handlers.context import ConnectionState

RECALL = "dsh-rofm:recall"
MEMORY_TASKS = "dsh-rofm:memory-tasks"
MEMORY_RULES = "dsh-rofm:memory-rules"

SECTION_ORDER: tuple[tuple[str, int], ...] = (
    (RECALL, 100),
    (MEMORY_TASKS, 101),
    (MEMORY_RULES, 102),
)


def section_specs(conn: ConnectionState) -> list[dict[str, Any]]:
    """`initialize` lists the sections only for hosts with a system prompt (reference §3.1)."""
    if not conn.capability("systemPrompt"):
        return []
    return [{"name": name, "order": order} for name, order in SECTION_ORDER]


def render_sections(texts: dict[str, str], conn: ConnectionState) -> list[dict[str, Any]]:
    """The `Sections` array: every owned section, in order, empty where there is no text."""
    if not conn.capability("systemPrompt"):
        return []
    return [
        {"name": name, "order": order, "text": texts.get(name, "")} for name, order in SECTION_ORDER
    ]
