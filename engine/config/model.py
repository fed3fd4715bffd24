"""The memory configuration (reference §3) as typed models: the one source of its tree.

Every key is named here once, with its type, engine default and bound (a :class:`Range`,
``Literal`` values, or a :class:`Special` marker where the type does not imply the rule):
:mod:`engine.config.validate` walks these fields to clean each layer. Attributes are
snake_case with the reference's camelCase as alias (either is accepted); ``extra="allow"``
keeps unknown keys (the reference keeps and ignores them); ``frozen=True`` lets hot
reload swap a config in one assignment.

Reading notes on the reference, and how they were decided:

* ``recall.computeDates``: §3 and the v1.5.4/v1.6.0 notes say "engine default false,
  packaged true", yet §3 also says the two differ in exactly six places (the five
  ``mode`` switches and ``time.timezone``): we keep the six and ship ``true`` on both.
* ``keywords.max 38 → 316`` in the extracted text is ``3~8 → 3~16``; ``keywords.min`` and
  ``keywords.max`` are clamped into 3..16.
* ``recall.categoryMatch.classes`` word lists beyond the quoted heads, and the
  ``importance.weights`` entries ("见文件" in the reference), are rofmd's own.
* Ranges the reference does not give are the natural domain of the value (counts >= 0,
  sizes >= 1, percentages 0..100, ratios and α-like values 0..1); where it gives one,
  the field says so in a comment.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engine.config.limits import ALPHA_MAX, ALPHA_MIN, KEYWORDS_MAX, KEYWORDS_MIN, RECALL_LIMIT_MAX
from engine.heuristic import DEFAULT_WEIGHTS


class Special(enum.Enum):
    """Field markers for rules the type does not imply (see :mod:`engine.config.validate`)."""

    TIMEZONE = "an IANA zone name, or '' for the host's local zone"
    NON_BLANK = "a string that is not empty or whitespace"
    ID_LIST = "QQ ids: strings or numbers, numbers turned into strings"
    ALWAYS_FALSE = "a switch the reference pins to false"


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive bounds a layer's number is clamped into (``lo_open``: rejected at ``lo``).

    Deliberately not ``Field(ge=, le=)``: pydantic would enforce those on every
    ``model_validate``, while a model only describes a tree that was already cleaned, and
    engine code and tests build configs beyond the user-facing ranges on purpose.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False


Percent = Annotated[float, Range(0, 100)]
PositivePercent = Annotated[float, Range(1, 100)]
Ratio = Annotated[float, Range(0, 1)]
Alpha = Annotated[float, Range(ALPHA_MIN, ALPHA_MAX)]  # α（0.01～1）
Count = Annotated[int, Range(0)]
Positive = Annotated[int, Range(1)]
KeywordCount = Annotated[int, Range(KEYWORDS_MIN, KEYWORDS_MAX)]  # v1.5.4: 3~16
TagMode = Literal["off", "index", "constrain"]
Words = tuple[str, ...]


def json_number_normalise(value: Any, include_unknown: bool = True) -> Any:
    """The JSON form of a value: sections dumped, integral floats turned into ints.

    JSON has one number type (``60`` is ``60.0``) while a float field turns ``60`` into
    ``60.0``: normalising keeps dumps identical to the config file and fingerprints
    independent of spelling. Only floats in the signed 64-bit range become ints (orjson
    refuses larger integers, while the float itself is writable)."""
    if isinstance(value, _Section):
        return value.to_json(include_unknown=include_unknown)
    if isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**63:
        return int(value)  # is_integer() is False for inf and nan
    if isinstance(value, Mapping):
        return {k: json_number_normalise(v, include_unknown) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_number_normalise(v, include_unknown) for v in value]
    return value


class _Section(BaseModel):
    """Common model settings: camelCase aliases, unknown keys kept, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    def to_json(self, *, include_unknown: bool = True) -> dict[str, Any]:
        """The camelCase JSON form; ``include_unknown=False`` keeps only modelled keys."""
        fields = type(self).model_fields
        tree = {field.alias or name: getattr(self, name) for name, field in fields.items()}
        if include_unknown and self.model_extra:
            tree.update(self.model_extra)
        return {key: json_number_normalise(value, include_unknown) for key, value in tree.items()}


class Switch(_Section):
    """A section led by its on/off switch, on unless a layer turns it off."""

    enabled: bool = True


class CompressConfig(Switch):
    """§3.0 archiving: when to cut, how much, and the v1.4.x guards around it."""

    trigger_percent: PositivePercent = 60
    compress_percent: PositivePercent = 20
    release_target_percent: Percent = 50
    release_floor_enabled: bool = True
    context_window_tokens: Count = 0  # 0 = use the window the host reports
    min_context_tokens: Count = 512
    min_messages_to_compress: Count = 4
    min_chunk_chars: Count = 200
    target_chunk_chars: Positive = 1200
    max_folders_per_run: Positive = 500
    max_folders_per_step: Positive = 500
    keep_recent_messages: Count = 2
    max_boundary_overshoot: Annotated[float, Range(1)] = 1.25
    protect_current_turn: bool = True
    allow_small_window: bool = False
    small_window_tokens: Count = 20000
    hard_limit_stop: bool = True
    apply_to_subagents: bool = False
    apply_to_main_sessions: bool = True
    pre_step_enabled: bool = True
    emergency_percent: PositivePercent = 85
    emergency_compress_percent: PositivePercent = 40
    max_extra_passes: Count = 2
    hard_limit_percent: PositivePercent = 95

    @property
    def release_floor_active(self) -> bool:
        """The floor only applies when enabled *and* below the trigger (reference §3.0)."""
        return self.release_floor_enabled and self.release_target_percent < self.trigger_percent


class ImportanceConfig(_Section):
    """§3.0.1 α bounds and the heuristic scorer's feature weights (see engine.heuristic)."""

    min: Alpha = 0.01
    max: Alpha = 1
    warn_above: Ratio = 0.8
    weights: Mapping[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))


class KeywordsConfig(_Section):
    """Archive-side keyword count (3..16) and matching mode."""

    min: KeywordCount = 3
    max: KeywordCount = 16
    extra_stopwords: Words = ()
    match_mode: Literal["contains", "exact"] = "contains"


class MatchConfig(_Section):
    """Optional extensions of bidirectional keyword matching (both off by default)."""

    expand_latin_case: bool = False
    cjk_bigram: bool = False


class CategoryClass(_Section):
    """One category of the deterministic synonym bridge: a label and its words."""

    label: str
    words: Words


# The six built-in classes of recall.categoryMatch (v1.4.1 addendum, Plan A). The
# reference names the classes and labels and quotes the head of the first two word lists
# (「喜好/偏好/喜欢/爱好/口味…」, 「约定/说好/承诺/以后都…」); the rest of each list is
# ours: closed, offline, deterministic synonym sets for the same intent.
_CATEGORY_CLASSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "preference": (
        "喜好",
        ("喜好", "偏好", "喜欢", "爱好", "口味", "最爱", "爱吃", "习惯", "讨厌", "不喜欢"),
    ),
    "agreement": ("约定", ("约定", "说好", "承诺", "以后都", "答应", "约好", "商定", "保证")),
    "decision": ("决定", ("决定", "决策", "决议", "定了", "选定", "拍板", "敲定")),
    "rule": ("规则", ("规则", "规定", "规矩", "原则", "准则", "守则", "规范")),
    "requirement": ("要求", ("要求", "需求", "必须", "务必", "一定要")),
    "taboo": ("禁忌", ("禁忌", "忌讳", "忌口", "禁止", "不许", "不准", "过敏")),
}


class CategoryMatchConfig(Switch):
    """Category expansion (Plan A): high-α memories reachable through class synonyms."""

    alpha_min: Ratio = 0.6
    classes: Mapping[str, CategoryClass] = Field(
        default_factory=lambda: {
            name: CategoryClass(label=label, words=words)
            for name, (label, words) in _CATEGORY_CLASSES.items()
        }
    )


class RareTermConfig(_Section):
    """Rare-term threshold τ = max(minPosting, ceil(ratio × N)); scanCap bounds the seeds."""

    ratio: Ratio = 0.002
    min_posting: Positive = 8
    scan_cap: Positive = 512


class RegisterConfig(_Section):
    """High-α defer register: lookahead × k_H candidates, capFactor × k_H capacity."""

    lookahead: Positive = 3
    cap_factor: Positive = 8
    ttl_rounds: Count = 2


class RecycleConfig(Switch):
    """Recycle lane: re-entry after a cooldown, at most maxPerRound per round."""

    cooldown_rounds: Count = 15
    max_per_round: Count = 1


class LedgerConfig(_Section):
    """Surfaced ledger bound and its overflow policy."""

    max_entries: Positive = 10000
    overflow: Literal["evict-lowest-alpha-last-seen"] = "evict-lowest-alpha-last-seen"


class BlockTrimConfig(_Section):
    """Priority block trimming with current-query protection and the high-α pin."""

    policy: Literal["priority"] = "priority"
    protect_current_query: bool = True
    pin_high: bool = True


class RoundBudgetConfig(_Section):
    """Per-round injected character budget."""

    max_chars: Positive = 20000


class FairnessConfig(_Section):
    """FAIR-DRI lanes (recall.mode = fair)."""

    theta_high: Ratio = 0.6
    explore_ratio: Ratio = 0.2
    specific_probe_slots: Count = 1
    rare_term: RareTermConfig = RareTermConfig()
    # ``register`` would shadow ABCMeta.register on the model class; PEP 8's trailing
    # underscore keeps the attribute usable while the JSON key stays "register".
    register_: RegisterConfig = Field(default=RegisterConfig(), alias="register")
    query_boost: bool = True
    recycle: RecycleConfig = RecycleConfig()
    ledger: LedgerConfig = LedgerConfig()
    block_trim: BlockTrimConfig = BlockTrimConfig()
    round_budget: RoundBudgetConfig = RoundBudgetConfig()


class AdaptiveQuotaConfig(Switch):
    """v1.5.0 adaptive quota for complex messages."""

    complex_quota: Annotated[int, Range(1, RECALL_LIMIT_MAX)] = 20  # = limit's ceiling
    complex_min_clauses: Positive = 2
    complex_min_chars: Positive = 160
    complex_min_keywords: Positive = 8


class ClauseSplitConfig(Switch):
    """v1.5.0 multi-clause recall."""

    max_clauses: Positive = 8
    min_clause_chars: Count = 2


class TagMentionsConfig(Switch):
    """v1.5.0 known tag names in the user message as hard filters."""

    max_tags_per_kind: Annotated[int, Range(1, 32)] = 4  # 1..32


class AssistantSaidConfig(Switch):
    """v1.5.0 「你说过」 assistant-utterance channel."""

    reserve_slots: Count = 2


class HighRelevanceConfig(Switch):
    """v1.5.5 guaranteed slots for memories matching several distinct query keywords."""

    min_matches: Positive = 2
    reserve_slots: Count = 2


class RankedConfig(_Section):
    """`recall.mode = "ranked"`: relevance-first selection (beyond the reference)."""

    min_relative_score: Ratio = 0.3
    alpha_prior: Ratio = 0.2
    passage_weight: Ratio = 0.5
    keep_rounds: Count = 1


class RecallConfig(Switch):
    """§3.0.2 recall selection, safety valves, legacy parameters and the v1.5.x channels."""

    # The engine keeps the reference's "fair"; the product ships "ranked" (BEYOND_REFERENCE).
    mode: Literal["ranked", "fair", "deterministic", "legacy"] = "fair"
    first_gen_max: Count = 10  # 0 = recall off (v1.4.1)
    hops: Count = 0
    max_recalled_blocks: Positive = 64
    max_recalled_chars: Positive = 120000
    max_window_percent: Percent = 10
    min_alpha: Ratio = 0
    persist_injected: bool = True
    category_match: CategoryMatchConfig = CategoryMatchConfig()
    sort: Literal["createdAt", "alpha", "generation"] = "createdAt"
    fairness: FairnessConfig = FairnessConfig()
    mu: float = 5
    sigma: Annotated[float, Range(0, lo_open=True)] = 3  # divides in p(n)
    max_generation: Count = 0  # 0 = unlimited
    probability_scale: Annotated[float, Range(0)] = 1
    seed: Count = 0  # > 0 = fixed seed
    trigger_source_kinds: Words = ("user",)
    apply_to_subagents: bool = False
    apply_to_main_sessions: bool = True
    esp_empty_hint: bool = True
    adaptive_quota: AdaptiveQuotaConfig = AdaptiveQuotaConfig()
    clause_split: ClauseSplitConfig = ClauseSplitConfig()
    tag_mentions: TagMentionsConfig = TagMentionsConfig()
    assistant_said: AssistantSaidConfig = AssistantSaidConfig()
    show_tags: bool = True
    compute_dates: bool = True  # see the reading notes above
    high_relevance: HighRelevanceConfig = HighRelevanceConfig()
    ranked: RankedConfig = RankedConfig()


class TimeConfig(_Section):
    """§3.0.3 time assistance (day/month/year windows, widening ladder)."""

    mode: TagMode = "index"
    # Resolved through zoneinfo at load time, so a misspelt zone is reported there rather
    # than surfacing as wrong day boundaries in a recall.
    timezone: Annotated[str, Special.TIMEZONE] = ""
    min_range_days: Positive = 3  # < 3 is allowed with a warning
    max_range_days: Positive = 366
    center_day_priority: bool = True
    # The ladder only widens, so it is kept in this canonical order.
    fallback: tuple[Literal["day3", "month", "year", "all"], ...] = ("day3", "month", "year", "all")
    fallback_min_results: Count = 1  # 0 is read as 1 (reference)
    window_scan_max: Positive = 4096
    ask_user_hint: bool = True
    judge_event_time: Annotated[bool, Special.ALWAYS_FALSE] = False

    @property
    def effective_fallback_min_results(self) -> int:
        """The reference treats 0 as 1."""
        return max(1, self.fallback_min_results)


class EventSimilarityConfig(_Section):
    """Event label similarity (Dice by default)."""

    metric: Literal["dice", "avg", "min"] = "dice"
    threshold: Ratio = 0.72
    max_candidates: Annotated[int, Range(1, 10)] = 5  # 1..10


class EventConfig(_Section):
    """Event labels: constraint mode, normalisation and merge approval."""

    mode: TagMode = "index"
    max_label_length: Positive = 60
    similarity: EventSimilarityConfig = EventSimilarityConfig()
    ask_user_hint: bool = True
    max_per_folder: Positive = 4
    merge_requires_approval: bool = True
    show_existing: bool = True
    show_existing_limit: Count = 24


class TagConfig(_Section):
    """Location and person tags share one shape."""

    mode: TagMode = "index"
    max_label_length: Positive = 60
    max_per_folder: Positive = 8
    auto_mention: bool = True


class TimeTagConfig(_Section):
    """Deterministic time tags computed at archive time."""

    mode: TagMode = "index"
    max_per_folder: Positive = 8
    week_start: Annotated[int, Range(1, 7)] = 1  # 1 = Monday .. 7 = Sunday
    max_span_days: Positive = 366


class AutoHeuristicAfterRoundsConfig(_Section):
    """Rounds of undigested pending before the heuristic fallback (plain / QQ channel)."""

    plain: Positive = 4
    channel: Positive = 2


class CategoryKeywordConfig(Switch):
    """Category-word guarantee for high-α memories (v1.4.1)."""

    alpha_min: Ratio = 0.6
    words: Words = ("喜好", "偏好", "习惯", "约定", "承诺", "决定", "规则", "要求", "禁忌")


class ScoringConfig(_Section):
    """§3.0.4 scoring task block budget, backpressure and heuristic fallback."""

    include_legacy: bool = False
    max_pending: Count = 200
    fallback: Literal["never", "onPressure", "always"] = "onPressure"
    auto_heuristic_after_rounds: AutoHeuristicAfterRoundsConfig = AutoHeuristicAfterRoundsConfig()
    task_budget_percent: Percent = 15
    task_max_tokens: Positive = 12000
    order: Literal["newest", "mixed", "oldest"] = "newest"
    warn_uniform_alpha: bool = True
    max_items_per_judge: Positive = 100
    category_keyword: CategoryKeywordConfig = CategoryKeywordConfig()
    judge_telemetry: bool = True


class StorageConfig(_Section):
    """§3.0.5 memory root (resolved by :func:`~engine.config.paths.resolve_memory_root`), caps."""

    dir: Annotated[str, Special.NON_BLANK] = "memory"
    per_session: bool = True
    max_folders: Positive = 10000


class LoggingConfig(Switch):
    """Log output switches."""

    verbose: bool = False


class TestConfig(_Section):
    """Reserved (no behaviour in the reference)."""

    __test__ = False  # not a pytest test class, despite the name

    dry_run: bool = False


class SecretsConfig(_Section):
    """What archiving does with a secret value (beyond the reference): ``redact`` keeps a
    typed placeholder, ``drop`` removes it with a note, ``off`` keeps it verbatim."""

    mode: Literal["redact", "drop", "off"] = "redact"


class CrossChatConfig(Switch):
    """v1.4.2 memory_group_recall (private owner -> group memories, read-only)."""

    owner_only: bool = True
    max_results: Annotated[int, Range(1, 20)] = 20  # clamp 1..20
    max_snippet_chars: Annotated[int, Range(80, 2000)] = 400  # clamp 80..2000
    max_groups: Annotated[int, Range(1, 500)] = 50  # clamp 1..500
    max_folders_per_group: Annotated[int, Range(1, 100000)] = 5000  # clamp 1..100000


class CompatConfig(_Section):
    """QQ channel compatibility (§3.2.9)."""

    qq_bots: Literal["auto", "off", "on"] = "auto"
    owner_ids: Annotated[Words, Special.ID_LIST] = ()
    member_min_alpha: Ratio = 0.5  # 0 = gating off
    auto_patch_derpyu: bool = True
    channel_score: Literal["model", "heuristic"] = "model"
    media_roots: Words = ()
    max_image_bytes: Positive = 8388608
    staging_ttl_ms: Positive = 86400000
    cross_chat: CrossChatConfig = CrossChatConfig()


class MemoryConfig(Switch):
    """The effective memory configuration (reference §3), one immutable value; ``enabled``
    is the activation-time switch (§3, §5): read at start, never reloaded."""

    compress: CompressConfig = CompressConfig()
    importance: ImportanceConfig = ImportanceConfig()
    keywords: KeywordsConfig = KeywordsConfig()
    match: MatchConfig = MatchConfig()
    recall: RecallConfig = RecallConfig()
    time: TimeConfig = TimeConfig()
    event: EventConfig = EventConfig()
    location: TagConfig = TagConfig()
    person: TagConfig = TagConfig()
    time_tag: TimeTagConfig = TimeTagConfig()
    rules: Switch = Switch()  # the dsh-rofm:memory-rules section
    scoring: ScoringConfig = ScoringConfig()
    storage: StorageConfig = StorageConfig()
    logging: LoggingConfig = LoggingConfig()
    test: TestConfig = TestConfig()
    secrets: SecretsConfig = SecretsConfig()
    compat: CompatConfig = CompatConfig()

    @classmethod
    def defaults(cls) -> MemoryConfig:
        """The engine defaults as a model (no packaged file, no user layers)."""
        return cls()
