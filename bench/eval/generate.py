"""Seeded two-person conversations with planted facts, and the questions about them.

Why generated data: recall quality can only be measured when we know, for every
question, which message holds its evidence. Each conversation is a chat log between
the user and a friend the assistant plays (``"Mina: …"`` / ``"Leo: …"``; a speaker name
on every line, which fools a naive keyword heuristic), with now and then the assistant
speaking as an assistant making a promise. Facts (people, places, dates, numbers,
decisions, preferences, promises) are each stated in exactly one short, one-sentence
evidence message with a unique surface string; everything else is distractor chatter
that shares the names, places, objects and topic words without the asked detail.

Pure and deterministic: everything comes from ``random.Random`` seeded with a string
made of the seed, the language and the conversation index (no global random state, no
wall clock); timestamps count from a fixed date. English and Chinese conversations are
built by the same code from `bench.eval.lexicon`, so they have the same structure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from bench.eval.lexicon import (
    ASSISTANT_KINDS,
    EVENT_KINDS,
    FRIEND_STATED,
    LEXICONS,
    MULTIHOP,
    PERSON_KINDS,
    PERSONAL_KINDS,
    Lexicon,
)

Lang = Literal["en", "zh"]
Role = Literal["user", "assistant"]
QuestionKind = Literal["single", "paraphrase", "multihop", "temporal", "two", "said"]
LANGS: tuple[Lang, ...] = ("en", "zh")
QUESTION_KINDS: tuple[QuestionKind, ...] = (
    "single",
    "paraphrase",
    "multihop",
    "temporal",
    "two",
    "said",
)
"""``two``: two single questions about two facts in one message (each fact's evidence
counts); ``said``: what the assistant said or promised, in a quote of the assistant
(你之前说过… / What did you say…), its evidence an assistant turn; asked only when none
of its words is among the evidence folder's judged keywords (`bench.eval.play`)."""
_WH = ("What", "Where", "When", "Which", "How", "Who")
TIMEZONE = "Asia/Shanghai"
"""The packaged `time.timezone`: session dates are the dates the recall block shows."""
FIRST_DAY = date(2026, 1, 5)
MINUTES = (5, 10, 15, 20, 25, 35, 40, 45, 50, 55)


@dataclass(frozen=True, slots=True)
class Size:
    """How big a conversation is."""

    sessions: tuple[int, int] = (6, 10)
    turns: tuple[int, int] = (20, 40)
    persons: int = 5
    facts_per_person: int = 3
    personal: int = len(PERSONAL_KINDS)
    events: int = len(EVENT_KINDS)
    paraphrase_share: float = 0.5
    max_multihop: int = 6
    max_questions: int = 50
    max_two: int = 6


DEFAULT_SIZE = Size()
QUICK_SIZE = Size(
    sessions=(7, 7), turns=(26, 30), persons=3, personal=5, events=2, max_multihop=3, max_two=3
)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message as the host sees it."""

    id: str
    role: Role
    text: str
    time_ms: int


@dataclass(frozen=True, slots=True)
class Turn:
    """A user message and the assistant's answer."""

    user: Message
    assistant: Message


@dataclass(frozen=True, slots=True)
class Session:
    """One day's chat."""

    index: int
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Fact:
    """A planted fact: stated once, in message ``message_id``, findable by ``surface``."""

    id: str
    kind: str
    message_id: str
    surface: str
    session: int
    person: str | None


@dataclass(frozen=True, slots=True)
class Question:
    """A question asked after the conversation, with the ids of its evidence messages."""

    id: str
    kind: QuestionKind
    text: str
    evidence: tuple[str, ...]
    surfaces: tuple[str, ...]
    facts: tuple[str, ...]
    answer: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """A whole generated conversation."""

    id: str
    lang: Lang
    seed: int
    user: str
    friend: str
    sessions: tuple[Session, ...]
    facts: tuple[Fact, ...]
    questions: tuple[Question, ...]

    def messages(self) -> list[Message]:
        """Every message in order."""
        return [m for s in self.sessions for t in s.turns for m in (t.user, t.assistant)]

    def last_time_ms(self) -> int:
        """When the last message was sent."""
        return self.sessions[-1].turns[-1].assistant.time_ms

    def to_json(self) -> dict[str, Any]:
        """Facts and questions (the messages are regenerated from the seed)."""
        return {
            "id": self.id,
            "lang": self.lang,
            "seed": self.seed,
            "user": self.user,
            "friend": self.friend,
            "sessions": [{"date": s.date, "turns": len(s.turns)} for s in self.sessions],
            "facts": [
                {"id": f.id, "kind": f.kind, "message": f.message_id, "surface": f.surface}
                for f in self.facts
            ],
            "questions": [
                {
                    "id": q.id,
                    "kind": q.kind,
                    "text": q.text,
                    "evidence": list(q.evidence),
                    "surfaces": list(q.surfaces),
                    "answer": q.answer,
                }
                for q in self.questions
            ],
        }


# ---- internal planning ---------------------------------------------------------------


@dataclass(slots=True)
class _Plan:
    """A fact before it has a message: its kind, speaker, template fields and surface."""

    key: str
    kind: str
    speaker: Literal["user", "friend", "assistant"]
    fields: dict[str, str]
    person: str | None
    text: str = ""
    surface: str = ""
    message_id: str = ""
    session: int = -1


@dataclass(slots=True)
class _Ctx:
    """What chatter may talk about."""

    lex: Lexicon
    base: dict[str, str]
    persons: list[dict[str, str]]
    plans: list[_Plan]
    surfaces: list[str] = field(default_factory=list)


def _fmt(template: str, fields: dict[str, str]) -> str:
    return template.format(**fields)


def _people(rng: random.Random, lex: Lexicon, n: int) -> list[dict[str, str]]:
    """Third persons with every attribute drawn (only some become facts)."""
    names = rng.sample(lex.persons, n)
    cities = rng.sample(lex.cities, n)
    streets = rng.sample(lex.streets, n)
    jobs = rng.sample(lex.jobs, n)
    objects = rng.sample(lex.gift_objects, n)
    adjectives = rng.sample(lex.gift_adjectives, n)
    pet_names = rng.sample(lex.pet_names, n)
    months = rng.sample(range(1, 13), n)
    people = []
    for i, name in enumerate(names):
        pet, pet_syn = rng.choice(lex.pets)
        people.append(
            {
                "P": name,
                "rel": rng.choice(lex.relations),
                "city": cities[i],
                "street": streets[i],
                "job": jobs[i][0],
                "work": jobs[i][1],
                "obj": objects[i][0],
                "art": objects[i][1],
                "adj": adjectives[i],
                "pet": pet,
                "pet_syn": pet_syn,
                "pname": pet_names[i],
                "date": lex.date_format.format(
                    month=lex.months[months[i] - 1], day=rng.randint(1, 28)
                ),
            }
        )
    return people


def _personal_fields(
    rng: random.Random, lex: Lexicon, people: list[dict[str, str]]
) -> dict[str, dict[str, str]]:
    """The values of every personal fact and event kind."""
    weekdays = rng.sample(lex.weekdays, 2)
    doctor, doctor_syn = rng.choice(lex.doctors)
    animal, animal_bare = rng.choice(lex.animals)
    hour, minute = rng.randint(8, 18), rng.choice(MINUTES)
    host = rng.choice(people)
    return {
        "price": {"item": rng.choice(lex.items), "n": str(rng.randint(20, 480))},
        "count": {"plant": rng.choice(lex.plants), "n": str(rng.randint(3, 24))},
        "appointment": {
            "doctor": doctor,
            "doctor_syn": doctor_syn,
            "weekday": weekdays[0],
            "time": lex.time_format.format(hour=hour, minute=minute),
        },
        "paint": {"colour": rng.choice(lex.colours)},
        "offer": {"company": rng.choice(lex.companies)},
        "hate": {"food": rng.choice(lex.foods)},
        "band": {"band": rng.choice(lex.bands)},
        "remind": {"task": rng.choice(lex.tasks), "weekday": weekdays[1]},
        "nickname": {"nick": rng.choice(lex.nicknames)},
        "race": {"race": rng.choice(lex.races), "n": str(rng.randint(38, 140))},
        "hike": {"lake": rng.choice(lex.lakes), "animal": animal, "animal_bare": animal_bare},
        "dinner": {"restaurant": rng.choice(lex.restaurants), "P": host["P"], "rel": host["rel"]},
        "interview": {"treat": rng.choice(lex.treats)},
    }


def _plans(
    rng: random.Random, lex: Lexicon, size: Size, base: dict[str, str], people: list[dict[str, str]]
) -> list[_Plan]:
    plans: list[_Plan] = []
    for person in people:
        for kind in rng.sample(PERSON_KINDS, size.facts_per_person):
            speaker: Literal["user", "friend", "assistant"] = (
                "friend" if kind in FRIEND_STATED and rng.random() < 0.5 else "user"
            )
            plans.append(
                _Plan(f"{person['P']}.{kind}", kind, speaker, {**base, **person}, person["P"])
            )
    values = _personal_fields(rng, lex, people)
    for kind in rng.sample(PERSONAL_KINDS, size.personal):
        speaker = "assistant" if kind in ASSISTANT_KINDS else "user"
        plans.append(_Plan(kind, kind, speaker, {**base, **values[kind]}, None))
    for kind in rng.sample(EVENT_KINDS, size.events):
        fields = {**base, **values[kind]}
        plans.append(_Plan(kind, kind, "user", fields, fields.get("P")))
    for plan in plans:
        plan.text = _fmt(lex.evidence[plan.kind], plan.fields)
        plan.surface = _fmt(lex.surface[plan.kind], plan.fields)
    return plans


# ---- chatter ---------------------------------------------------------------------------


def _join(lex: Lexicon, parts: list[str]) -> str:
    return lex.sentence_gap.join(p for p in parts if p)


def _chatter_once(rng: random.Random, ctx: _Ctx) -> tuple[str, str]:
    lex = ctx.lex
    r = rng.random()
    fields: dict[str, str] = dict(ctx.base)
    if r < 0.3:
        user = [rng.choice(lex.generic_user)]
        if rng.random() < 0.5:
            user.append(rng.choice(lex.own_life))
        friend = [rng.choice(lex.generic_friend)]
    else:
        if r < 0.6 or not ctx.plans:
            fields.update(rng.choice(ctx.persons))
            main = rng.choice(lex.person_chatter)
        else:
            plan = rng.choice(ctx.plans)
            fields.update(plan.fields)
            main = rng.choice(lex.topic_chatter[plan.kind])
        user = [_fmt(main, fields)]
        if rng.random() < 0.5:
            user.append(rng.choice(lex.own_life))
        if rng.random() < 0.25:
            user.append(rng.choice(lex.follow_ups))
        reactions = [x for x in lex.reactions if "{P}" not in x or "P" in fields]
        friend = [_fmt(rng.choice(reactions + list(lex.generic_friend)), fields)]
    friend.extend(rng.sample(lex.own_life, rng.choice((0, 1, 1, 2, 2))))
    if rng.random() < 0.3:
        friend.append(rng.choice(lex.follow_ups))
    return _join(lex, user), _join(lex, friend)


def _clean(text: str, surfaces: list[str]) -> bool:
    return not any(s in text for s in surfaces)


def _chatter(rng: random.Random, ctx: _Ctx) -> tuple[str, str]:
    """A distractor turn that contains no fact's surface string."""
    for _ in range(40):
        user, friend = _chatter_once(rng, ctx)
        if _clean(user, ctx.surfaces) and _clean(friend, ctx.surfaces):
            return user, friend
    return ctx.lex.generic_user[0], ctx.lex.generic_friend[0]


def _reaction(rng: random.Random, ctx: _Ctx, plan: _Plan) -> str:
    lex = ctx.lex
    for _ in range(40):
        pool = [x for x in lex.reactions if "{P}" not in x or plan.person is not None]
        parts = [_fmt(rng.choice(pool), plan.fields)]
        parts.extend(rng.sample(lex.own_life, rng.choice((0, 1, 1, 2))))
        text = _join(lex, parts)
        if _clean(text, ctx.surfaces):
            return text
    return lex.generic_friend[0]


# ---- questions -------------------------------------------------------------------------


def _questions(
    rng: random.Random, lex: Lexicon, size: Size, conv_id: str, plans: list[_Plan], dates: list[str]
) -> list[Question]:
    by_key = {p.key: p for p in plans}
    out: list[tuple[QuestionKind, str, list[_Plan], str]] = []
    for plan in plans:
        q = lex.questions
        if plan.kind in EVENT_KINDS:
            out.append(("temporal", _fmt(q[f"{plan.kind}.temporal"], plan.fields), [plan], ""))
            continue
        out.append(("single", _fmt(q[f"{plan.kind}.single"], plan.fields), [plan], plan.surface))
        if rng.random() < size.paraphrase_share:
            text = _fmt(q[f"{plan.kind}.paraphrase"], plan.fields)
            out.append(("paraphrase", text, [plan], plan.surface))
        if plan.kind == "gift" and rng.random() < 0.5:
            out.append(("temporal", _fmt(q["gift.temporal"], plan.fields), [plan], ""))
    hops: list[tuple[QuestionKind, str, list[_Plan], str]] = []
    for plan in plans:
        if plan.person is None or plan.kind not in PERSON_KINDS:
            continue
        for first, second in MULTIHOP:
            if plan.kind != first:
                continue
            other = by_key.get(f"{plan.person}.{second}")
            if other is not None:
                text = _fmt(lex.questions[f"{first}+{second}"], plan.fields)
                hops.append(("multihop", text, [plan, other], other.surface))
    rng.shuffle(hops)
    out.extend(hops[: size.max_multihop])
    while len(out) > size.max_questions:
        paraphrases = [i for i, o in enumerate(out) if o[0] == "paraphrase"]
        out.pop(rng.choice(paraphrases) if paraphrases else len(out) - 1)
    rng.shuffle(out)
    questions = []
    for i, (kind, text, evidence, answer) in enumerate(out):
        if kind == "temporal":
            answer = dates[evidence[0].session]
        questions.append(_question(f"{conv_id}-q{i:02d}", kind, text, evidence, answer))
    return questions


def _question(
    qid: str, kind: QuestionKind, text: str, evidence: list[_Plan], answer: str
) -> Question:
    """A question whose evidence is the messages that stated `evidence`'s facts."""
    return Question(
        id=qid,
        kind=kind,
        text=text,
        evidence=tuple(p.message_id for p in evidence),
        surfaces=tuple(p.surface for p in evidence),
        facts=tuple(p.key for p in evidence),
        answer=answer,
    )


def _join_two(lang: Lang, first: str, second: str) -> str:
    """Two questions as one message: Chinese back to back (each ends with ？), English
    with "And" (a question word after it lower-cased)."""
    if lang == "zh":
        return first + second
    word = second.split(" ", 1)[0]
    return f"{first} And {second[0].lower() + second[1:] if word in _WH else second}"


def _more_questions(
    seed_text: str,
    lang: Lang,
    lex: Lexicon,
    size: Size,
    conv_id: str,
    plans: list[_Plan],
    start: int,
) -> list[Question]:
    """The ``two`` and ``said`` questions, from their own random stream (so every other
    question, and the conversation, is what it was before these kinds existed), asked
    after all the others."""
    rng = random.Random(f"{seed_text}:more")
    singles = [p for p in plans if f"{p.kind}.single" in lex.questions]
    pairs = [
        (a, b) for i, a in enumerate(singles) for b in singles[i + 1 :] if a.person != b.person
    ]
    rng.shuffle(pairs)
    out: list[tuple[QuestionKind, str, list[_Plan]]] = []
    for a, b in pairs[: size.max_two]:
        first = _fmt(lex.questions[f"{a.kind}.single"], a.fields)
        second = _fmt(lex.questions[f"{b.kind}.single"], b.fields)
        out.append(("two", _join_two(lang, first, second), [a, b]))
    for p in plans:
        template = lex.questions.get(f"{p.kind}.said")
        if template is not None and p.speaker == "assistant":
            out.append(("said", _fmt(template, p.fields), [p]))
    return [
        _question(
            f"{conv_id}-q{start + i:02d}",
            kind,
            text,
            evidence,
            " / ".join(p.surface for p in evidence),
        )
        for i, (kind, text, evidence) in enumerate(out)
    ]


# ---- the conversation ------------------------------------------------------------------


def _session_start_ms(day: date, rng: random.Random) -> int:
    local = datetime(
        day.year,
        day.month,
        day.day,
        rng.randint(8, 19),
        rng.randint(0, 59),
        tzinfo=ZoneInfo(TIMEZONE),
    )
    return int(local.timestamp()) * 1000


def _attempt(
    rng: random.Random, lang: Lang, index: int, seed: int, size: Size, attempt: int = 0
) -> Conversation:
    lex = LEXICONS[lang]
    conv_id = f"{lang}-{index:02d}"
    user, friend = rng.choice(lex.user_names), rng.choice(lex.friend_names)
    base = {"U": user, "F": friend}
    people = _people(rng, lex, size.persons)
    plans = _plans(rng, lex, size, base, people)
    ctx = _Ctx(lex, base, people, plans, [p.surface for p in plans])

    n_sessions = rng.randint(*size.sessions)
    lengths = [rng.randint(*size.turns) for _ in range(n_sessions)]
    # Facts go anywhere but the last session and a session's first turn.
    slots = [(s, t) for s in range(n_sessions - 1) for t in range(1, lengths[s])]
    chosen = rng.sample(slots, len(plans))
    at = {slot: plan for slot, plan in zip(chosen, plans, strict=True)}

    day = FIRST_DAY + timedelta(days=rng.randint(0, 90))
    sessions: list[Session] = []
    dates: list[str] = []
    prefix = lex.prefix
    for s, length in enumerate(lengths):
        if s:
            day += timedelta(days=rng.randint(1, 5))
        dates.append(day.isoformat())
        now = _session_start_ms(day, rng)
        turns: list[Turn] = []
        for t in range(length):
            plan = at.get((s, t))
            mid = f"{conv_id}-s{s}-t{t:02d}"
            if plan is None:
                u_text, a_text = _chatter(rng, ctx)
                user_text = prefix.format(name=user) + u_text
                assistant_text = prefix.format(name=friend) + a_text
            elif plan.speaker == "user":
                user_text = prefix.format(name=user) + plan.text
                assistant_text = prefix.format(name=friend) + _reaction(rng, ctx, plan)
                plan.message_id, plan.session = f"{mid}-u", s
            else:
                setup = lex.setups["friend" if plan.speaker == "friend" else plan.kind]
                user_text = prefix.format(name=user) + _fmt(setup, plan.fields)
                assistant_text = plan.text
                if plan.speaker == "friend":
                    assistant_text = prefix.format(name=friend) + plan.text
                plan.message_id, plan.session = f"{mid}-a", s
            answer_at = now + rng.randint(20, 120) * 1000
            turns.append(
                Turn(
                    Message(f"{mid}-u", "user", user_text, now),
                    Message(f"{mid}-a", "assistant", assistant_text, answer_at),
                )
            )
            now = answer_at + rng.randint(40, 240) * 1000
        sessions.append(Session(s, dates[-1], tuple(turns)))

    facts = tuple(
        Fact(f"{conv_id}-{p.key}", p.kind, p.message_id, p.surface, p.session, p.person)
        for p in plans
    )
    questions = _questions(rng, lex, size, conv_id, plans, dates)
    more = _more_questions(
        f"rofmd-eval:{seed}:{lang}:{index}:{attempt}",
        lang,
        lex,
        size,
        conv_id,
        plans,
        len(questions),
    )
    return Conversation(
        conv_id, lang, seed, user, friend, tuple(sessions), facts, tuple(questions + more)
    )


def validate(conv: Conversation) -> list[str]:
    """What is wrong with a conversation (empty: nothing). Checks the benchmark's premises:
    every evidence id exists, every surface string occurs in exactly one message, its
    evidence message, and in no question."""
    problems: list[str] = []
    messages = conv.messages()
    by_id = {m.id: m for m in messages}
    times = [m.time_ms for m in messages]
    if times != sorted(times) or len(set(times)) != len(times):
        problems.append("message times are not strictly increasing")
    for fact in conv.facts:
        holders = [m.id for m in messages if fact.surface in m.text]
        if holders != [fact.message_id]:
            problems.append(f"{fact.id}: surface {fact.surface!r} in {holders}")
    for q in conv.questions:
        if not q.evidence or len(q.evidence) != len(q.surfaces):
            problems.append(f"{q.id}: evidence and surfaces do not match")
        for mid, surface in zip(q.evidence, q.surfaces, strict=False):
            if mid not in by_id:
                problems.append(f"{q.id}: evidence {mid} does not exist")
            elif surface not in by_id[mid].text:
                problems.append(f"{q.id}: {surface!r} not in {mid}")
        for fact in conv.facts:
            if fact.surface in q.text:
                problems.append(f"{q.id}: the question contains the surface {fact.surface!r}")
    return problems


def generate(seed: int, lang: Lang, index: int = 0, size: Size = DEFAULT_SIZE) -> Conversation:
    """Conversation ``index`` of language ``lang`` for ``seed``; the same arguments always
    give the same conversation."""
    rng = random.Random(f"rofmd-eval:{seed}:{lang}:{index}")
    problems: list[str] = []
    for attempt in range(20):
        conv = _attempt(rng, lang, index, seed, size, attempt)
        problems = validate(conv)
        if not problems:
            return conv
    raise ValueError(f"cannot generate {lang}-{index:02d} for seed {seed}: {problems[:3]}")


def generate_all(
    seed: int, langs: tuple[Lang, ...], conversations: int, size: Size = DEFAULT_SIZE
) -> list[Conversation]:
    """``conversations`` conversations per language."""
    return [generate(seed, lang, i, size) for lang in langs for i in range(conversations)]
