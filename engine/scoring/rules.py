"""The memory-use rules, dsh-rofm:memory-rules (reference §1.13.6, §1.15, §1.18).

Nine numbered rules in v1.5.6 order under one heading. The time-reference rule exists
only with ``recall.computeDates`` (§1.14: with it off "时间口径规则也不注入"), so with
computeDates off the section has eight rules. ``rules.enabled=false`` removes the
section (the handler returns ""), except in a QQ channel session, whose channel rule
(§3.2.8) stays.
"""

from __future__ import annotations

from engine import texts


def rules_text(*, compute_dates: bool, enabled: bool = True, channel: bool = False) -> str:
    """The section text ("" when there is no rule to show). ``channel``: a QQ channel
    session, which also gets the channel visibility rule (§3.2.8)."""
    rules = []
    if enabled:
        rules = [
            (name, body)
            for name, body in texts.RULES
            if compute_dates or name != texts.RULES_TIME_RULE_NAME
        ]
    if channel:
        rules.append(texts.RULES_CHANNEL)
    if not rules:
        return ""
    lines = [texts.RULES_HEADING]
    lines += [
        texts.RULES_ITEM.format(n=i, name=name, body=body)
        for i, (name, body) in enumerate(rules, 1)
    ]
    return "\n".join(lines)
