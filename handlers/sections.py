"""The three system-prompt sections the daemon owns (PROTOCOL.md §3).

Each section's text comes from the use case that owns it:
`handlers.recall_section` (recall block), `handlers.tasks_section` (memory task
block) and `handlers.rules_section` (memory-use rules). `current_sections`
gathers them for every answer that can change the system prompt, so the
bridge's cache is always complete. A section with nothing to show renders to the
empty string, which the bridge treats as "render nothing".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from handlers.context import ConnectionState, RequestContext

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

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


async def current_sections(
    app: App, state: SessionState, ctx: RequestContext
) -> list[dict[str, Any]]:
    """All three sections as they stand now for this session and connection."""
    if not ctx.connection.capability("systemPrompt"):
        return []
    from handlers.recall_section import recall_section_text
    from handlers.rules_section import rules_section_text
    from handlers.tasks_section import tasks_section_text

    texts = {
        RECALL: await recall_section_text(app, state, ctx),
        MEMORY_TASKS: await tasks_section_text(app, state, ctx),
        MEMORY_RULES: await rules_section_text(app, state, ctx),
    }
    return render_sections(texts, ctx.connection)


async def sections_answer(app: App, state: SessionState, ctx: RequestContext) -> dict[str, Any]:
    """`{"sections", "startsRequestSeries"}`: the part every section-carrying answer shares."""
    return {
        "sections": await current_sections(app, state, ctx),
        "startsRequestSeries": state.consume_new_series(),
    }
