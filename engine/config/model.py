"""Typed, frozen view of a validated memory configuration.

The models only *describe* a config that :mod:`engine.config.validate` has already
checked and clamped, so constructing them from a build never fails; they exist so
that the rest of the engine reads ``cfg.recall.fairness.theta_high`` with types and
completion instead of poking into nested dicts with string keys.

Attribute names are snake_case; the JSON spelling (the reference's camelCase) is the
alias, and either is accepted on input. ``extra="allow"`` keeps unknown keys (the
reference keeps and ignores them), and ``frozen=True`` makes a config a value that can
be swapped in one assignment on hot reload without anyone mutating it in place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine.config.defaults import ENGINE_DEFAULTS

__all__ = [
    "AdaptiveQuotaConfig",
    "AssistantSaidConfig",
    "AutoHeuristicAfterRoundsConfig",
    "BlockTrimConfig",
    "CategoryClass",
    "CategoryKeywordConfig",
    "CategoryMatchConfig",
    "ClauseSplitConfig",
    "CompatConfig",
    "CompressConfig",
    "CrossChatConfig",
    "EventConfig",
    "EventSimilarityConfig",
    "FairnessConfig",
    "HighRelevanceConfig",
    "ImportanceConfig",
    "KeywordsConfig",
    "LedgerConfig",
    "LoggingConfig",
    "MatchConfig",
    "MemoryConfig",
    "RareTermConfig",
    "RecallConfig",
    "RecycleConfig",
    "RegisterConfig",
    "RoundBudgetConfig",
    "RulesConfig",
    "ScoringConfig",
    "SecretsConfig",
    "StorageConfig",
    "TagConfig",
    "TagMentionsConfig",
    "TestConfig",
    "TimeConfig",
    "TimeTagConfig",
    "json_number_normalise",
]

TagMode = Literal["off", "index", "constrain"]


def json_number_normalise(value: Any) -> Any:
    """Turn integral floats into ints, recursively.

    JSON (and the reference's JavaScript) has one number type: ``60`` and ``60.0`` are
    the same value. Python keeps them apart, and a float-typed field turns ``60`` into
    ``60.0``; normalising keeps dumps identical to the config file and fingerprints
    independent of how a number was spelt. Only floats inside the signed 64-bit range
    become ints: JSON writers (orjson among them) refuse larger integers, while the
    float itself is writable.
    """
    if (
        isinstance(value, float)
        and math.isfinite(value)
        and value.is_integer()
        and -(2**63) <= value < 2**63
    ):
        return int(value)
    if isinstance(value, Mapping):
        return {k: json_number_normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_number_normalise(v) for v in value]
    return value


class _Section(BaseModel):
    """Common model settings: camelCase aliases, unknown keys kept, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
    )

    def to_json(self, *, include_unknown: bool = True) -> dict[str, Any]:
        """The camelCase JSON form; ``include_unknown=False`` keeps only modelled keys."""
        out: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            out[field.alias or name] = _dump(getattr(self, name), include_unknown)
        if include_unknown and self.model_extra:
            for key, value in self.model_extra.items():
                out[key] = json_number_normalise(_dump(value, include_unknown))
        return out


def _dump(value: Any, include_unknown: bool) -> Any:
    if isinstance(value, _Section):
        return value.to_json(include_unknown=include_unknown)
    if isinstance(value, Mapping):
        return {k: _dump(v, include_unknown) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dump(v, include_unknown) for v in value]
    return json_number_normalise(value)


# --- §3.0 compress -------------------------------------------------------------------


class CompressConfig(_Section):
    """Archiving: when to cut, how much, and the v1.4.x guards around it."""

    enabled: bool
    trigger_percent: float
    compress_percent: float
    release_target_percent: float
    release_floor_enabled: bool
    context_window_tokens: int
    min_context_tokens: int
    min_messages_to_compress: int
    min_chunk_chars: int
    target_chunk_chars: int
    max_folders_per_run: int
    max_folders_per_step: int
    keep_recent_messages: int
    max_boundary_overshoot: float
    protect_current_turn: bool
    allow_small_window: bool
    small_window_tokens: int
    hard_limit_stop: bool
    apply_to_subagents: bool
    apply_to_main_sessions: bool
    pre_step_enabled: bool
    emergency_percent: float
    emergency_compress_percent: float
    max_extra_passes: int
    hard_limit_percent: float

    @property
    def release_floor_active(self) -> bool:
        """The floor only applies when enabled *and* below the trigger (reference §3.0)."""
        return self.release_floor_enabled and self.release_target_percent < self.trigger_percent


# --- §3.0.1 importance / keywords / match -----------------------------------------------


class ImportanceConfig(_Section):
    """α bounds and the heuristic scorer's feature weights."""

    min: float
    max: float
    warn_above: float
    weights: Mapping[str, float]


class KeywordsConfig(_Section):
    """Archive-side keyword count (3..16) and matching mode."""

    min: int
    max: int
    extra_stopwords: tuple[str, ...]
    match_mode: Literal["contains", "exact"]


class MatchConfig(_Section):
    """Optional extensions of bidirectional keyword matching (both off by default)."""

    expand_latin_case: bool
    cjk_bigram: bool


# --- §3.0.2 recall -------------------------------------------------------------------


class CategoryClass(_Section):
    """One category of the deterministic synonym bridge: a label and its words."""

    label: str
    words: tuple[str, ...]


class CategoryMatchConfig(_Section):
    """Category expansion (Plan A): high-α memories reachable through class synonyms."""

    enabled: bool
    alpha_min: float
    classes: Mapping[str, CategoryClass]


class RareTermConfig(_Section):
    """Rare-term threshold τ = max(minPosting, ceil(ratio × N)); scanCap bounds the seeds."""

    ratio: float
    min_posting: int
    scan_cap: int


class RegisterConfig(_Section):
    """High-α defer register: lookahead × k_H candidates, capFactor × k_H capacity."""

    lookahead: int
    cap_factor: int
    ttl_rounds: int


class RecycleConfig(_Section):
    """Recycle lane: re-entry after a cooldown, at most maxPerRound per round."""

    enabled: bool
    cooldown_rounds: int
    max_per_round: int


class LedgerConfig(_Section):
    """Surfaced ledger bound and its overflow policy."""

    max_entries: int
    overflow: Literal["evict-lowest-alpha-last-seen"]


class BlockTrimConfig(_Section):
    """Priority block trimming with current-query protection and the high-α pin."""

    policy: Literal["priority"]
    protect_current_query: bool
    pin_high: bool


class RoundBudgetConfig(_Section):
    """Per-round injected character budget."""

    max_chars: int


class FairnessConfig(_Section):
    """FAIR-DRI lanes (recall.mode = fair)."""

    theta_high: float
    explore_ratio: float
    specific_probe_slots: int
    rare_term: RareTermConfig
    # ``register`` would shadow ABCMeta.register on the model class; PEP 8's trailing
    # underscore keeps the attribute usable while the JSON key stays "register".
    register_: RegisterConfig = Field(alias="register")
    query_boost: bool
    recycle: RecycleConfig
    ledger: LedgerConfig
    block_trim: BlockTrimConfig
    round_budget: RoundBudgetConfig


class AdaptiveQuotaConfig(_Section):
    """v1.5.0 adaptive quota for complex messages."""

    enabled: bool
    complex_quota: int
    complex_min_clauses: int
    complex_min_chars: int
    complex_min_keywords: int


class ClauseSplitConfig(_Section):
    """v1.5.0 multi-clause recall."""

    enabled: bool
    max_clauses: int
    min_clause_chars: int


class TagMentionsConfig(_Section):
    """v1.5.0 known tag names in the user message as hard filters."""

    enabled: bool
    max_tags_per_kind: int


class AssistantSaidConfig(_Section):
    """v1.5.0 「你说过」 assistant-utterance channel."""

    enabled: bool
    reserve_slots: int


class HighRelevanceConfig(_Section):
    """v1.5.5 guaranteed slots for memories matching several distinct query keywords."""

    enabled: bool
    min_matches: int
    reserve_slots: int


class RankedConfig(_Section):
    """`recall.mode = "ranked"`: relevance-first selection (beyond the reference)."""

    min_relative_score: float
    alpha_prior: float
    passage_weight: float
    keep_rounds: int


class RecallConfig(_Section):
    """Recall selection, safety valves, legacy parameters and the v1.5.x channels."""

    enabled: bool
    mode: Literal["ranked", "fair", "deterministic", "legacy"]
    first_gen_max: int
    hops: int
    max_recalled_blocks: int
    max_recalled_chars: int
    max_window_percent: float
    min_alpha: float
    persist_injected: bool
    category_match: CategoryMatchConfig
    sort: Literal["createdAt", "alpha", "generation"]
    fairness: FairnessConfig
    mu: float
    sigma: float
    max_generation: int
    probability_scale: float
    seed: int
    trigger_source_kinds: tuple[str, ...]
    apply_to_subagents: bool
    apply_to_main_sessions: bool
    esp_empty_hint: bool
    adaptive_quota: AdaptiveQuotaConfig
    clause_split: ClauseSplitConfig
    tag_mentions: TagMentionsConfig
    assistant_said: AssistantSaidConfig
    show_tags: bool
    compute_dates: bool
    high_relevance: HighRelevanceConfig
    ranked: RankedConfig


# --- §3.0.3 time / event / tags / rules ---------------------------------------------


class TimeConfig(_Section):
    """Time assistance (day/month/year windows, widening ladder)."""

    mode: TagMode
    timezone: str
    min_range_days: int
    max_range_days: int
    center_day_priority: bool
    fallback: tuple[Literal["day3", "month", "year", "all"], ...]
    fallback_min_results: int
    window_scan_max: int
    ask_user_hint: bool
    judge_event_time: bool

    @property
    def effective_fallback_min_results(self) -> int:
        """The reference treats 0 as 1."""
        return max(1, self.fallback_min_results)


class EventSimilarityConfig(_Section):
    """Event label similarity (Dice by default)."""

    metric: Literal["dice", "avg", "min"]
    threshold: float
    max_candidates: int


class EventConfig(_Section):
    """Event labels: constraint mode, normalisation and merge approval."""

    mode: TagMode
    max_label_length: int
    similarity: EventSimilarityConfig
    ask_user_hint: bool
    max_per_folder: int
    merge_requires_approval: bool
    show_existing: bool
    show_existing_limit: int


class TagConfig(_Section):
    """Location and person tags share one shape."""

    mode: TagMode
    max_label_length: int
    max_per_folder: int
    auto_mention: bool


class TimeTagConfig(_Section):
    """Deterministic time tags computed at archive time."""

    mode: TagMode
    max_per_folder: int
    week_start: int
    max_span_days: int


class RulesConfig(_Section):
    """The dsh-rofm:memory-rules section switch."""

    enabled: bool


# --- §3.0.4 scoring ------------------------------------------------------------------


class AutoHeuristicAfterRoundsConfig(_Section):
    """Rounds of undigested pending before the heuristic fallback (plain / QQ channel)."""

    plain: int
    channel: int


class CategoryKeywordConfig(_Section):
    """Category-word guarantee for high-α memories (v1.4.1)."""

    enabled: bool
    alpha_min: float
    words: tuple[str, ...]


class ScoringConfig(_Section):
    """Scoring task block budget, backpressure and heuristic fallback."""

    include_legacy: bool
    max_pending: int
    fallback: Literal["never", "onPressure", "always"]
    auto_heuristic_after_rounds: AutoHeuristicAfterRoundsConfig
    task_budget_percent: float
    task_max_tokens: int
    order: Literal["newest", "mixed", "oldest"]
    warn_uniform_alpha: bool
    max_items_per_judge: int
    category_keyword: CategoryKeywordConfig
    judge_telemetry: bool


# --- §3.0.5 storage / logging / test / compat ------------------------------------------


class StorageConfig(_Section):
    """Memory root (resolved by :func:`engine.config.paths.resolve_memory_root`) and caps."""

    dir: str
    per_session: bool
    max_folders: int


class LoggingConfig(_Section):
    """Log output switches."""

    enabled: bool
    verbose: bool


class TestConfig(_Section):
    """Reserved (no behaviour in the reference)."""

    __test__ = False  # not a pytest test class, despite the name

    dry_run: bool


class SecretsConfig(_Section):
    """What archiving does with a secret value (beyond the reference): ``redact`` keeps a
    typed placeholder, ``drop`` removes it with a note, ``off`` keeps it verbatim."""

    mode: Literal["redact", "drop", "off"]


class CrossChatConfig(_Section):
    """v1.4.2 memory_group_recall (private owner -> group memories, read-only)."""

    enabled: bool
    owner_only: bool
    max_results: int
    max_snippet_chars: int
    max_groups: int
    max_folders_per_group: int


class CompatConfig(_Section):
    """QQ channel compatibility (§3.2.9)."""

    qq_bots: Literal["auto", "off", "on"]
    owner_ids: tuple[str, ...]
    member_min_alpha: float
    auto_patch_derpyu: bool
    channel_score: Literal["model", "heuristic"]
    media_roots: tuple[str, ...]
    max_image_bytes: int
    staging_ttl_ms: int
    cross_chat: CrossChatConfig


# --- the whole config ----------------------------------------------------------------


class MemoryConfig(_Section):
    """The effective memory configuration (reference §3), one immutable value."""

    enabled: bool
    compress: CompressConfig
    importance: ImportanceConfig
    keywords: KeywordsConfig
    match: MatchConfig
    recall: RecallConfig
    time: TimeConfig
    event: EventConfig
    location: TagConfig
    person: TagConfig
    time_tag: TimeTagConfig
    rules: RulesConfig
    scoring: ScoringConfig
    storage: StorageConfig
    logging: LoggingConfig
    test: TestConfig
    secrets: SecretsConfig
    compat: CompatConfig

    @classmethod
    def defaults(cls) -> MemoryConfig:
        """The engine defaults as a model (no packaged file, no user layers)."""
        return cls.model_validate(ENGINE_DEFAULTS)
