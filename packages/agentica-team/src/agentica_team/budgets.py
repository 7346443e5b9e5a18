"""Budgets: the token and money limits of a course and its students, enforced at admission.

A model call first ``reserve``s its estimated maximum (tokens, micro-dollars) on each budget that
applies: the course's, then the student's (their override, else the course's default). Each
budget's usage row takes it in ONE conditional statement (an upsert whose UPDATE adds the
estimate only if used + reserved + estimate stays within the limit), so admission holds across
worker processes (PostgreSQL re-checks the condition on the newest row version; SQLite serializes
writers); a refused call raises ``BudgetExceeded`` / ``RateLimited`` and holds nothing. ``settle``
then swaps the estimate for the real usage (also counted per day in ``team_usage_daily``), a
failed call is ``release``d and ``release_stale`` frees crashed calls' holds. Periods (UTC day,
ISO week, whole course) are keyed by the reservation's time; the token economy's savings
(prompt-cache hits, compaction) are counted per day beside the usage.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from agentica.errors import UsageError
from agentica_team.db.engine import Database
from agentica_team.db.hot import Hot
from agentica_team.db.schema import (
    budget_usage,
    budgets,
    courses,
    members,
    new_id,
    rate_windows,
    reservations,
    usage_daily,
)
from agentica_team.errors import BadRequest, BudgetExceeded, NotFound, RateLimited, TeamError

if TYPE_CHECKING:
    from agentica_team.audit import Audit

__all__ = [
    "PERIODS",
    "SCOPES",
    "BudgetInfo",
    "Budgets",
    "Remaining",
    "Reservation",
    "UsageRow",
    "period_key",
    "period_resets_at",
]

SCOPES = ("course", "student")
PERIODS = ("day", "week", "course")
_MAX_AMOUNT = 2**53  # sums of a few of these still fit a BIGINT
_MAX_RATE = 2**31 - 1
_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ATTEMPTS = 3  # conditional UPDATEs per budget before giving up on a moving target (PostgreSQL)
_KEEP_EXPIRED = 86_400.0  # an expired reservation can still be settled for a day


# -- periods -----------------------------------------------------------------------------------


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _day(ts: float) -> str:
    return _utc(ts).date().isoformat()


def period_key(period: str, ts: float) -> str:
    """The usage row a call at ``ts`` counts on: ``2026-11-24``, ``2026-W48`` or ``all``."""
    if period == "course":
        return "all"
    today = _utc(ts).date()
    if period == "day":
        return today.isoformat()
    year, week, _ = today.isocalendar()
    return f"{year}-W{week:02d}"


def period_resets_at(period: str, ts: float) -> float | None:
    """When the period that contains ``ts`` ends (next UTC midnight / Monday); ``None`` for
    ``course`` (it never resets)."""
    if period == "course":
        return None
    today = _utc(ts).date()
    days = 1 if period == "day" else 7 - today.weekday()
    start = datetime.combine(today + timedelta(days=days), datetime.min.time(), UTC)
    return start.timestamp()


def _iso(ts: float | None) -> str | None:
    return None if ts is None else _utc(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- records -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BudgetInfo:
    """One budget: ``scope`` ``course`` (the whole class together, ``user_id`` "") or
    ``student`` (``user_id`` "" = the default for every student without their own, else that
    student's override). ``None`` limits are unlimited. On a course budget,
    ``requests_per_minute`` and ``max_concurrent`` count the whole class; on a student budget,
    each student."""

    id: str
    course_id: str
    scope: str
    user_id: str
    period: str
    max_tokens: int | None
    max_cost_micros: int | None
    requests_per_minute: int | None
    max_concurrent: int | None
    updated_at: float


@dataclass(frozen=True, slots=True)
class Reservation:
    """An admitted call's hold on its budgets; ``settle`` or ``release`` it exactly once."""

    id: str
    course_id: str
    user_id: str
    tokens: int
    cost_micros: int
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Remaining:
    """A budget that applies to a student, and its current period's usage."""

    budget_id: str
    scope: str
    period: str
    max_tokens: int | None
    max_cost_micros: int | None
    used_tokens: int
    used_cost_micros: int
    reserved_tokens: int
    reserved_cost_micros: int
    resets_at: float | None

    @property
    def remaining_tokens(self) -> int | None:
        """Tokens a new call may still reserve (``None``: unlimited)."""
        return _left(self.max_tokens, self.used_tokens, self.reserved_tokens)

    @property
    def remaining_cost_micros(self) -> int | None:
        """Micro-dollars a new call may still reserve (``None``: unlimited)."""
        return _left(self.max_cost_micros, self.used_cost_micros, self.reserved_cost_micros)


@dataclass(frozen=True, slots=True)
class UsageRow:
    """A student's usage on one UTC day from one source (``gateway`` or ``agent``).
    ``cached_tokens`` (prompt-prefix cache hits) are part of ``input_tokens``;
    ``compaction_saved_tokens`` are tokens compaction kept out of later calls."""

    course_id: str
    user_id: str
    day: str
    source: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_micros: int
    cached_tokens: int
    compaction_saved_tokens: int


@dataclass(frozen=True, slots=True)
class _Held:
    """What a reservation holds (its ``entries`` JSON): the amounts on each usage row."""

    course_id: str
    user_id: str
    tokens: int
    cost_micros: int
    day: str
    rows: tuple[tuple[str, str, str], ...]  # (budget_id, subject, period_key)

    def dumps(self) -> str:
        return json.dumps(
            {
                "tokens": self.tokens,
                "cost_micros": self.cost_micros,
                "day": self.day,
                "rows": [list(row) for row in self.rows],
            }
        )

    @classmethod
    def loads(cls, course_id: str, user_id: str, text: str) -> _Held:
        data = json.loads(text)
        rows = tuple((str(b), str(s), str(k)) for b, s, k in data["rows"])
        return cls(course_id, user_id, data["tokens"], data["cost_micros"], data["day"], rows)


def _left(limit: int | None, used: int, reserved: int) -> int | None:
    return None if limit is None else max(0, limit - used - reserved)


def _info(row: Any) -> BudgetInfo:
    return BudgetInfo(
        id=row.id,
        course_id=row.course_id,
        scope=row.scope,
        user_id=row.user_id,
        period=row.period,
        max_tokens=row.max_tokens,
        max_cost_micros=row.max_cost_micros,
        requests_per_minute=row.requests_per_minute,
        max_concurrent=row.max_concurrent,
        updated_at=row.updated_at,
    )


# -- validation --------------------------------------------------------------------------------


def _check_limit(name: str, value: int | None, *, least: int, most: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be a whole number or null (unlimited), not {value!r}")
    if not least <= value <= most:
        raise BadRequest(f"{name} must be between {least:,} and {most:,}; got {value:,}")


def _check_budget(scope: str, user_id: str, period: str, limits: dict[str, int | None]) -> None:
    if scope not in SCOPES:
        raise BadRequest(f"scope must be 'course' or 'student', not {scope!r}")
    if period not in PERIODS:
        raise BadRequest(f"period must be 'day', 'week' or 'course', not {period!r}")
    if scope == "course" and user_id:
        raise BadRequest(
            "a course budget covers the whole class, so it takes no user_id; to limit one "
            "student use scope 'student' with their user_id"
        )
    _check_limit("max_tokens", limits["max_tokens"], least=0, most=_MAX_AMOUNT)
    _check_limit("max_cost_micros", limits["max_cost_micros"], least=0, most=_MAX_AMOUNT)
    _check_limit("requests_per_minute", limits["requests_per_minute"], least=1, most=_MAX_RATE)
    _check_limit("max_concurrent", limits["max_concurrent"], least=1, most=_MAX_RATE)
    if not user_id and all(value is None for value in limits.values()):
        raise BadRequest(
            "set at least one of max_tokens, max_cost_micros, requests_per_minute, "
            "max_concurrent (a budget without limits only makes sense as one student's "
            "exemption from the default student budget)"
        )


def _check_amounts(**amounts: int) -> None:
    for name, value in amounts.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_AMOUNT:
            raise UsageError(f"{name} must be a whole number from 0 to 2**53, not {value!r}")


def _check_day(name: str, value: str | None) -> None:
    if value is None:
        return
    try:
        if not _DAY_RE.fullmatch(value):
            raise ValueError(value)
        date.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"{name} must be a date as YYYY-MM-DD (UTC), not {value!r}") from None


# -- refusals ----------------------------------------------------------------------------------


def _whose(budget: BudgetInfo) -> str:
    owner = "the course's" if budget.scope == "course" else "the student's"
    if budget.period == "course":
        return f"{owner} budget for the whole course"
    return f"{owner} {'daily' if budget.period == 'day' else 'weekly'} budget"


def _dollars(micros: int) -> str:
    text = f"{micros / 1_000_000:,.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def _budget_detail(budget: BudgetInfo) -> dict[str, str]:
    return {"id": budget.id, "scope": budget.scope, "period": budget.period}


def _tokens(n: int) -> str:
    return f"{n:,} token" if n == 1 else f"{n:,} tokens"


def _over_budget(
    budget: BudgetInfo, usage: _Usage, tokens: int, cost_micros: int, now: float
) -> BudgetExceeded | None:
    """The refusal for a call that does not fit ``budget`` given ``usage`` (None: it fits)."""
    checks = (
        ("tokens", budget.max_tokens, usage.used_tokens, usage.reserved_tokens, tokens),
        (
            "cost_micros",
            budget.max_cost_micros,
            usage.used_cost_micros,
            usage.reserved_cost_micros,
            cost_micros,
        ),
    )
    for unit, limit, used, reserved, needed in checks:
        if limit is not None and used + reserved + needed > limit:
            return BudgetExceeded(
                _refusal_message(budget, unit, (limit, used, reserved, needed), now),
                budget=_budget_detail(budget),
                unit=unit,
                limit=limit,
                used=used,
                reserved=reserved,
                needed=needed,
                remaining_tokens=_left(budget.max_tokens, usage.used_tokens, usage.reserved_tokens),
                remaining_cost_micros=_left(
                    budget.max_cost_micros, usage.used_cost_micros, usage.reserved_cost_micros
                ),
                resets_at=_iso(period_resets_at(budget.period, now)),
            )
    return None


def _refusal_message(
    budget: BudgetInfo, unit: str, numbers: tuple[int, int, int, int], now: float
) -> str:
    limit, used, reserved, needed = numbers
    amount = _tokens if unit == "tokens" else _dollars
    if needed > limit:
        return (
            f"this call needs up to {amount(needed)} but {_whose(budget)} is {amount(limit)} in "
            "total; ask for fewer output tokens or send a shorter prompt, or ask the teacher "
            "to raise the budget"
        )
    left = max(0, limit - used - reserved)
    bare = "{:,}".format if unit == "tokens" else _dollars  # the unit said once, at the limit
    held = f" ({bare(reserved)} more are held by calls in progress)" if reserved else ""
    resets = period_resets_at(budget.period, now)
    when = (
        f"it resets at {_iso(resets)}"
        if resets is not None
        else "it does not reset; ask the teacher to raise it"
    )
    return (
        f"this call needs up to {amount(needed)} but {_whose(budget)} has {bare(left)} of "
        f"{amount(limit)} left{held}; {when}"
    )


def _too_many_running(budget: BudgetInfo, usage: _Usage) -> RateLimited | None:
    limit = budget.max_concurrent
    if limit is None or usage.in_flight < limit:
        return None
    who = "the class" if budget.scope == "course" else "the student"
    return RateLimited(
        f"{who} already has {usage.in_flight:,} model calls in progress and the limit is "
        f"{limit:,} at a time; retry when one finishes",
        retry_after=1,
        budget=_budget_detail(budget),
        limit={"max_concurrent": limit},
    )


# -- the service -------------------------------------------------------------------------------


class Budgets:
    """The budgets, reservations and usage counters in ``db`` (``clock``: Unix seconds)."""

    def __init__(
        self, db: Database, *, audit: Audit | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._audit = audit
        self._clock = clock
        self._daily: dict[tuple[str, ...], Hot] = {}
        self._holds: dict[tuple[bool, bool, bool], Hot] = {}
        w = rate_windows.c
        insert = self._db.insert(rate_windows)
        self._count = Hot(
            insert.on_conflict_do_update(
                index_elements=[w.budget_id, w.user_id, w.window],
                set_={"count": w.count + 1},
                where=w.count < sa.bindparam("b_limit", type_=sa.Integer),
            )
        )

    # -- budgets ------------------------------------------------------------------------------

    async def set_budget(
        self,
        course_id: str,
        *,
        scope: str,
        user_id: str = "",
        period: str,
        max_tokens: int | None = None,
        max_cost_micros: int | None = None,
        requests_per_minute: int | None = None,
        max_concurrent: int | None = None,
        actor: str = "",
    ) -> BudgetInfo:
        """Create or replace the budget of ``(course_id, scope, user_id)``; its id and its usage
        so far are kept (a new ``period`` counts afresh from its current period). The change is
        audited (``budget_set`` by ``actor``) in the same transaction."""
        limits = {
            "max_tokens": max_tokens,
            "max_cost_micros": max_cost_micros,
            "requests_per_minute": requests_per_minute,
            "max_concurrent": max_concurrent,
        }
        _check_budget(scope, user_id, period, limits)
        now = self._clock()

        async def body(conn: AsyncConnection) -> BudgetInfo:
            await self._check_target(conn, course_id, user_id)
            values = {"period": period, **limits, "updated_at": now}
            key = {"course_id": course_id, "scope": scope, "user_id": user_id}
            insert = self._db.insert(budgets).values(id=new_id("bud"), **key, **values)
            await conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[budgets.c.course_id, budgets.c.scope, budgets.c.user_id],
                    set_=values,
                )
            )
            where = [budgets.c[name] == value for name, value in key.items()]
            info = _info((await conn.execute(sa.select(budgets).where(*where))).one())
            if self._audit is not None:
                data = {"scope": scope, "user_id": user_id, "period": period, **limits}
                await self._audit.record_in(
                    conn, "budget_set", actor_id=actor, course_id=course_id, subject=info.id,
                    data=data,
                )  # fmt: skip
            return info

        return await self._db.transaction(body)

    async def _check_target(self, conn: AsyncConnection, course_id: str, user_id: str) -> None:
        found = await conn.scalar(sa.select(courses.c.id).where(courses.c.id == course_id))
        if found is None:
            raise NotFound(f"there is no course {course_id!r}")
        if not user_id:
            return
        member = await conn.scalar(
            sa.select(members.c.user_id).where(
                members.c.course_id == course_id, members.c.user_id == user_id
            )
        )
        if member is None:
            raise BadRequest(
                f"user {user_id!r} is not a member of this course; add them to the course "
                "first, or leave user_id empty for the default student budget"
            )

    async def list_budgets(self, course_id: str) -> list[BudgetInfo]:
        """The course's budgets: the course budget first, then the default, then overrides."""
        query = (
            sa.select(budgets)
            .where(budgets.c.course_id == course_id)
            .order_by(budgets.c.scope, budgets.c.user_id)
        )
        async with self._db.read() as conn:
            return [_info(row) for row in await conn.execute(query)]

    async def delete_budget(self, course_id: str, budget_id: str, *, actor: str = "") -> bool:
        """Delete a budget and its usage counters; ``False`` if the course has no such budget.
        Calls in progress on it settle without effect on it. Audited (``budget_deleted`` by
        ``actor``) in the same transaction."""

        async def body(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                sa.delete(budgets).where(
                    budgets.c.id == budget_id, budgets.c.course_id == course_id
                )
            )
            if result.rowcount == 0:
                return False
            await conn.execute(sa.delete(budget_usage).where(budget_usage.c.budget_id == budget_id))
            await conn.execute(sa.delete(rate_windows).where(rate_windows.c.budget_id == budget_id))
            if self._audit is not None:
                await self._audit.record_in(
                    conn, "budget_deleted", actor_id=actor, course_id=course_id,
                    subject=budget_id,
                )  # fmt: skip
            return True

        return await self._db.transaction(body)

    @staticmethod
    def _applying(conn: Connection, course_id: str, user_id: str) -> list[BudgetInfo]:
        """The budgets that apply to ``user_id``, course budget first (the lock order)."""
        params = {"b_course": course_id, "b_user": user_id}
        found = [_info(row) for row in _APPLYING.execute(conn, params)]
        course = [b for b in found if b.scope == "course"]
        own = [b for b in found if b.scope == "student" and b.user_id == user_id and user_id]
        default = [b for b in found if b.scope == "student" and b.user_id == ""]
        return course + (own or default)

    # -- admission ----------------------------------------------------------------------------

    async def reserve(
        self,
        *,
        course_id: str,
        user_id: str,
        tokens: int,
        cost_micros: int,
        along: Callable[[Connection], Any] | None = None,
    ) -> Reservation:
        """Hold ``tokens`` and ``cost_micros`` (the call's estimated maximum) on every budget
        that applies, or raise ``BudgetExceeded`` / ``RateLimited`` holding nothing.
        ``along(conn)`` runs in the same transaction once the call is admitted (an audit record
        of the request: durable with the admission, one commit for both; synchronous, as
        ``Database.run`` runs it)."""
        _check_amounts(tokens=tokens, cost_micros=cost_micros)

        def body(conn: Connection) -> Reservation:
            now = self._clock()
            applying = self._applying(conn, course_id, user_id)
            rows = tuple(
                (b.id, "" if b.scope == "course" else user_id, period_key(b.period, now))
                for b in applying
            )
            held = _Held(course_id, user_id, tokens, cost_micros, _day(now), rows)
            reservation = Reservation(new_id("rsv"), course_id, user_id, tokens, cost_micros, now)
            # first the new row nobody else touches, so the budgets' rows stay locked briefly
            _OPEN.execute(
                conn,
                {
                    "id": reservation.id,
                    "user_id": user_id,
                    "course_id": course_id,
                    "created_at": now,
                    "entries": held.dumps(),
                    "state": "open",
                },
            )
            for budget, row in zip(applying, rows, strict=True):
                if budget.requests_per_minute is not None:
                    self._count_request(conn, budget, row[1], now)
                self._hold(conn, budget, row, tokens, cost_micros, now)
            if along is not None:
                along(conn)
            return reservation

        return await self._db.run(body)

    def _count_request(
        self, conn: Connection, budget: BudgetInfo, subject: str, now: float
    ) -> None:
        """Count one request in the current minute's window (one conditional upsert), or raise
        ``RateLimited``."""
        limit = budget.requests_per_minute
        assert limit is not None
        window = int(now // 60)
        counted = self._count.execute(
            conn,
            {
                "budget_id": budget.id,
                "user_id": subject,
                "window": window,
                "count": 1,
                "b_limit": limit,
            },
        )
        if counted.rowcount == 1:
            return
        retry_after = max(1, math.ceil((window + 1) * 60 - now))
        who = "the class" if budget.scope == "course" else "the student"
        raise RateLimited(
            f"{who} made {limit:,} model calls in the last minute, the most allowed; retry in "
            f"{retry_after} s",
            retry_after=retry_after,
            budget=_budget_detail(budget),
            limit={"requests_per_minute": limit},
        )

    def _hold(
        self,
        conn: Connection,
        budget: BudgetInfo,
        row: tuple[str, str, str],
        tokens: int,
        cost_micros: int,
        now: float,
    ) -> None:
        """Add the hold to the usage row with one conditional statement (an upsert whose
        update only happens if the hold fits), or raise the refusal."""
        if _larger_than(budget, tokens, cost_micros):
            too_large = _over_budget(budget, _usage(conn, row), tokens, cost_micros, now)
            assert too_large is not None
            raise too_large
        budget_id, subject, key = row
        params = {
            "budget_id": budget_id,
            "subject": subject,
            "period_key": key,
            "reserved_tokens": tokens,
            "reserved_cost_micros": cost_micros,
            "in_flight": 1,
        }
        limits = {
            "b_max_tokens": budget.max_tokens,
            "b_max_cost": budget.max_cost_micros,
            "b_max_concurrent": budget.max_concurrent,
        }
        params.update((name, value) for name, value in limits.items() if value is not None)
        hold = self._hold_statement(budget)
        for _ in range(_ATTEMPTS):
            if hold.execute(conn, params).rowcount == 1:
                return
            usage = _usage(conn, row)
            refusal: TeamError | None = _too_many_running(budget, usage) or _over_budget(
                budget, usage, tokens, cost_micros, now
            )
            if refusal is not None:
                raise refusal
        # PostgreSQL: the row kept changing between the statement and the re-read
        raise RateLimited(
            f"{_whose(budget)} is busy with other calls right now; retry in a moment",
            retry_after=1,
            budget=_budget_detail(budget),
        )

    def _hold_statement(self, budget: BudgetInfo) -> Hot:
        """The conditional upsert that holds a call's amounts on a usage row if they fit the
        budget's limits (bound at execution); one statement per combination of limits set."""
        shape = (
            budget.max_tokens is not None,
            budget.max_cost_micros is not None,
            budget.max_concurrent is not None,
        )
        statement = self._holds.get(shape)
        if statement is not None:
            return statement
        u = budget_usage.c
        insert = self._db.insert(budget_usage)
        new = insert.excluded
        big = sa.BigInteger
        fits: list[sa.ColumnElement[bool]] = []
        if shape[0]:
            limit = sa.bindparam("b_max_tokens", type_=big)
            fits.append(u.used_tokens + u.reserved_tokens + new.reserved_tokens <= limit)
        if shape[1]:
            limit = sa.bindparam("b_max_cost", type_=big)
            fits.append(
                u.used_cost_micros + u.reserved_cost_micros + new.reserved_cost_micros <= limit
            )
        if shape[2]:
            fits.append(u.in_flight < sa.bindparam("b_max_concurrent", type_=sa.Integer))
        statement = self._holds[shape] = Hot(
            insert.on_conflict_do_update(
                index_elements=[u.budget_id, u.subject, u.period_key],
                set_={
                    "reserved_tokens": u.reserved_tokens + new.reserved_tokens,
                    "reserved_cost_micros": u.reserved_cost_micros + new.reserved_cost_micros,
                    "in_flight": u.in_flight + 1,
                },
                where=sa.and_(*fits) if fits else None,
            )
        )
        return statement

    async def settle(
        self,
        reservation: Reservation,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_micros: int,
        cached_tokens: int = 0,
        source: str = "gateway",
    ) -> None:
        """Replace the reservation's hold by the real usage (input + output tokens, cost) on
        the rows it reserved, and count it in the daily usage. Settling a reservation twice, or
        one already released, does nothing; one that ``release_stale`` expired is still
        counted."""
        await self._db.run(
            self.settling(
                reservation,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_micros=cost_micros,
                cached_tokens=cached_tokens,
                source=source,
            )
        )

    def settling(
        self,
        reservation: Reservation,
        *,
        input_tokens: int,
        output_tokens: int,
        cost_micros: int,
        cached_tokens: int = 0,
        source: str = "gateway",
    ) -> Callable[[Connection], None]:
        """``settle`` as the body of a write transaction (the amounts are checked now), to
        commit together with other writes (the call's audit record); synchronous, for
        ``Database.run``."""
        _check_amounts(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_micros=cost_micros,
            cached_tokens=cached_tokens,
        )
        _check_source(source)
        tokens = input_tokens + output_tokens

        def body(conn: Connection) -> None:
            closed = _close(conn, reservation.id, "settled", ("open", "expired"))
            if closed is None:
                return
            held, was_open = closed
            if held.rows:
                amounts = {"b_used": tokens, "b_used_cost": cost_micros}
                if was_open:
                    amounts.update(b_tokens=held.tokens, b_cost=held.cost_micros)
                (_SETTLE_OPEN if was_open else _SETTLE_EXPIRED).execute(
                    conn,
                    [{**_usage_params(row), **amounts} for row in held.rows],
                )
            self._count_daily(
                conn,
                held,
                source,
                requests=1,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_micros=cost_micros,
                cached_tokens=cached_tokens,
            )

        return body

    async def release(self, reservation: Reservation) -> None:
        """Give the hold back without usage (the call failed before using the model, or was
        cancelled); does nothing if the reservation was settled or released already."""
        await self._db.run(self.releasing(reservation))

    def releasing(self, reservation: Reservation) -> Callable[[Connection], None]:
        """``release`` as the body of a write transaction (synchronous, for ``Database.run``)."""

        def body(conn: Connection) -> None:
            closed = _close(conn, reservation.id, "released", ("open",))
            if closed is not None:
                _unhold(conn, closed[0])

        return body

    async def release_stale(self, *, older_than: float) -> int:
        """Release the open reservations made more than ``older_than`` seconds ago (their calls
        crashed; a late ``settle`` still counts its usage) and return how many; also forget
        finished reservations and rate windows no longer needed. ``older_than`` must exceed the
        longest model call, since other workers' calls in progress are open too."""
        now = self._clock()
        cutoff = now - older_than
        r = reservations.c
        async with self._db.read() as conn:
            stale = list(
                await conn.scalars(
                    sa.select(r.id).where(r.state == "open", r.created_at < cutoff).order_by(r.id)
                )
            )

        def expire(reservation_id: str) -> Callable[[Connection], int]:
            def body(conn: Connection) -> int:
                closed = _close(conn, reservation_id, "expired", ("open",))
                if closed is None:  # settled or released meanwhile
                    return 0
                _unhold(conn, closed[0])
                return 1

            return body

        def forget(conn: Connection) -> None:
            conn.execute(
                sa.delete(reservations).where(
                    sa.or_(
                        sa.and_(r.state.in_(["settled", "released"]), r.created_at < cutoff),
                        sa.and_(r.state == "expired", r.created_at < cutoff - _KEEP_EXPIRED),
                    )
                )
            )
            conn.execute(sa.delete(rate_windows).where(rate_windows.c.window < int(now // 60) - 1))

        released = 0
        for reservation_id in stale:  # one transaction each: the lock order of a settle
            released += await self._db.run(expire(reservation_id))
        await self._db.run(forget)
        return released

    # -- usage --------------------------------------------------------------------------------

    async def add_compaction_savings(
        self, course_id: str, user_id: str, tokens: int, *, source: str = "agent"
    ) -> None:
        """Count ``tokens`` that compaction kept out of the student's later calls (today)."""
        _check_amounts(tokens=tokens)
        _check_source(source)
        if tokens == 0:
            return
        held = _Held(course_id, user_id, 0, 0, _day(self._clock()), ())

        def body(conn: Connection) -> None:
            self._count_daily(conn, held, source, compaction_saved_tokens=tokens)

        await self._db.run(body)

    def _count_daily(self, conn: Connection, held: _Held, source: str, **amounts: int) -> None:
        names = tuple(amounts)
        statement = self._daily.get(names)
        if statement is None:  # built once per set of amounts: cached, no construction per call
            insert = self._db.insert(usage_daily)
            statement = self._daily[names] = Hot(
                insert.on_conflict_do_update(
                    index_elements=[
                        usage_daily.c.course_id,
                        usage_daily.c.user_id,
                        usage_daily.c.day,
                        usage_daily.c.source,
                    ],
                    set_={name: usage_daily.c[name] + insert.excluded[name] for name in names},
                )
            )
        key = {"course_id": held.course_id, "user_id": held.user_id, "day": held.day}
        statement.execute(conn, {**key, "source": source, **amounts})

    async def remaining(self, course_id: str, user_id: str) -> list[Remaining]:
        """The budgets that apply to this student (course budget first) and what is left of
        each in its current period."""
        now = self._clock()

        def read(conn: Connection) -> list[Remaining]:
            found = []
            for budget in self._applying(conn, course_id, user_id):
                subject = "" if budget.scope == "course" else user_id
                key = (budget.id, subject, period_key(budget.period, now))
                found.append(_remaining(budget, _usage(conn, key), now))
            return found

        async with self._db.read() as conn:
            return await conn.run_sync(read)

    async def usage(
        self,
        course_id: str,
        *,
        user_id: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[UsageRow]:
        """The course's daily usage rows (of one student if ``user_id``), ``since`` to ``until``
        inclusive (``YYYY-MM-DD``, UTC), by day, student and source."""
        _check_day("since", since)
        _check_day("until", until)
        if since is not None and until is not None and since > until:
            raise BadRequest(f"since ({since}) is after until ({until}); swap them")
        c = usage_daily.c
        query = sa.select(usage_daily).where(c.course_id == course_id)
        if user_id is not None:
            query = query.where(c.user_id == user_id)
        if since is not None:
            query = query.where(c.day >= since)
        if until is not None:
            query = query.where(c.day <= until)
        query = query.order_by(c.day, c.user_id, c.source)
        async with self._db.read() as conn:
            return [_usage_row(row) for row in await conn.execute(query)]


# -- helpers on one connection -----------------------------------------------------------------


def _check_source(source: str) -> None:
    if not isinstance(source, str) or not 0 < len(source) <= 16:
        raise UsageError(
            f"source must be a short name such as 'gateway' or 'agent', not {source!r}"
        )


_u = budget_usage.c
_r = reservations.c
_USAGE_ROW = (
    _u.budget_id == sa.bindparam("b_budget"),
    _u.subject == sa.bindparam("b_subject"),
    _u.period_key == sa.bindparam("b_key"),
)
_UNHOLD_SET = {
    "reserved_tokens": _u.reserved_tokens - sa.bindparam("b_tokens", type_=sa.BigInteger),
    "reserved_cost_micros": _u.reserved_cost_micros - sa.bindparam("b_cost", type_=sa.BigInteger),
    "in_flight": _u.in_flight - 1,
}
_USE_SET = {
    "used_tokens": _u.used_tokens + sa.bindparam("b_used", type_=sa.BigInteger),
    "used_cost_micros": _u.used_cost_micros + sa.bindparam("b_used_cost", type_=sa.BigInteger),
}
# the statements of the hot path, built once (no construction or cache-key walk per call)
_SETTLE_OPEN = Hot(sa.update(budget_usage).where(*_USAGE_ROW).values({**_USE_SET, **_UNHOLD_SET}))
_SETTLE_EXPIRED = Hot(sa.update(budget_usage).where(*_USAGE_ROW).values(_USE_SET))
_UNHOLD = Hot(sa.update(budget_usage).where(*_USAGE_ROW).values(_UNHOLD_SET))
_USAGE = Hot(sa.select(budget_usage).where(*_USAGE_ROW))
_CLOSE = Hot(
    sa.update(reservations)
    .where(_r.id == sa.bindparam("b_id"), _r.state == sa.bindparam("b_prior"))
    .values(state=sa.bindparam("b_state"))
    .returning(_r.course_id, _r.user_id, _r.entries)
)
_OPEN = Hot(sa.insert(reservations))
_APPLYING = Hot(
    sa.select(budgets).where(
        budgets.c.course_id == sa.bindparam("b_course"),
        sa.or_(
            sa.and_(budgets.c.scope == "course", budgets.c.user_id == ""),
            sa.and_(
                budgets.c.scope == "student",
                budgets.c.user_id.in_([sa.bindparam("b_user"), ""]),
            ),
        ),
    )
)


def _usage_params(row: Sequence[str]) -> dict[str, str]:
    budget_id, subject, key = row
    return {"b_budget": budget_id, "b_subject": subject, "b_key": key}


def _unhold(conn: Connection, held: _Held) -> None:
    if held.rows:
        amounts = {"b_tokens": held.tokens, "b_cost": held.cost_micros}
        _UNHOLD.execute(conn, [{**_usage_params(row), **amounts} for row in held.rows])


def _close(
    conn: Connection, reservation_id: str, state: str, before: tuple[str, ...]
) -> tuple[_Held, bool] | None:
    """Move the reservation from one of the ``before`` states to ``state`` (one conditional
    UPDATE each, so only one settle or release wins); what it held and whether it was open."""
    for prior in before:
        params = {"b_id": reservation_id, "b_prior": prior, "b_state": state}
        row = _CLOSE.execute(conn, params).first()
        if row is not None:
            return _Held.loads(row.course_id, row.user_id, row.entries), prior == "open"
    return None


def _larger_than(budget: BudgetInfo, tokens: int, cost_micros: int) -> bool:
    """Whether the call alone exceeds the whole budget."""
    return (budget.max_tokens is not None and tokens > budget.max_tokens) or (
        budget.max_cost_micros is not None and cost_micros > budget.max_cost_micros
    )


@dataclass(frozen=True, slots=True)
class _Usage:
    used_tokens: int = 0
    used_cost_micros: int = 0
    reserved_tokens: int = 0
    reserved_cost_micros: int = 0
    in_flight: int = 0


def _usage(conn: Connection, row: Sequence[str]) -> _Usage:
    """A usage row's counters (zeros if it does not exist yet)."""
    found = _USAGE.execute(conn, _usage_params(row)).first()
    if found is None:
        return _Usage()
    return _Usage(
        found.used_tokens,
        found.used_cost_micros,
        found.reserved_tokens,
        found.reserved_cost_micros,
        found.in_flight,
    )


def _remaining(budget: BudgetInfo, usage: _Usage, now: float) -> Remaining:
    return Remaining(
        budget_id=budget.id,
        scope=budget.scope,
        period=budget.period,
        max_tokens=budget.max_tokens,
        max_cost_micros=budget.max_cost_micros,
        used_tokens=usage.used_tokens,
        used_cost_micros=usage.used_cost_micros,
        reserved_tokens=usage.reserved_tokens,
        reserved_cost_micros=usage.reserved_cost_micros,
        resets_at=period_resets_at(budget.period, now),
    )


def _usage_row(row: Any) -> UsageRow:
    return UsageRow(
        course_id=row.course_id,
        user_id=row.user_id,
        day=row.day,
        source=row.source,
        requests=row.requests,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_micros=row.cost_micros,
        cached_tokens=row.cached_tokens,
        compaction_saved_tokens=row.compaction_saved_tokens,
    )
