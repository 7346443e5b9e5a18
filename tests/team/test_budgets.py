"""Budgets: admission holds under concurrency (one engine, several engines, several processes) on
SQLite and PostgreSQL; student and course budgets, overrides, periods, money, rate and
concurrency limits, crashed calls, idempotent settling, the refusal's message, daily usage."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from agentica.errors import UsageError
from agentica_team.audit import Audit
from agentica_team.budgets import Budgets, Remaining, Reservation, period_key, period_resets_at
from agentica_team.db.engine import Database
from agentica_team.db.schema import (
    budget_usage,
    courses,
    members,
    metadata,
    rate_windows,
    reservations,
    users,
)
from agentica_team.errors import BadRequest, BudgetExceeded, NotFound, RateLimited
from tests.postgres import Cluster

COURSE = "c_web"
STUDENTS = ("s_ada", "s_bob", "s_cy")
NOON = datetime(2026, 11, 24, 12, 0, tzinfo=UTC).timestamp()  # a Tuesday, ISO week 48


class Clock:
    """The service's clock, moved by the test."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def at(self, text: str) -> None:
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


# -- fixtures --------------------------------------------------------------------------------


def upgraded(url: str) -> str:
    """``url`` with the schema created (from a sync fixture: alembic's work stays off the
    tests' event loop)."""

    async def upgrade() -> None:
        database = Database(url)
        await database.upgrade()
        await database.aclose()

    asyncio.run(upgrade())
    return url


@pytest.fixture(scope="module")
def pg_url(pg_cluster: Cluster) -> str:
    """One upgraded database for this module (tests empty it)."""
    return upgraded(pg_cluster.create_database(f"budgets_{os.getpid()}_{random.randrange(10**9)}"))


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An upgraded SQLite file that each test copies."""
    path = tmp_path_factory.mktemp("budgets") / "template.db"
    upgraded(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, tmp_path / "team.db")
        return f"sqlite+aiosqlite:///{tmp_path / 'team.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    """An empty database with the schema, one course, its teacher and three students."""
    database = Database(db_url)
    async with database.write() as conn:
        if database.dialect == "postgresql":
            names = ", ".join(table.name for table in metadata.sorted_tables)
            await conn.exec_driver_sql(f"TRUNCATE {names} CASCADE")
        await conn.execute(
            sa.insert(users),
            [
                {"id": uid, "email": f"{uid}@school.test", "name": uid, "role": role,
                 "created_at": NOON}
                for uid, role in [("t_tea", "teacher"), *((s, "student") for s in STUDENTS)]
            ],
        )  # fmt: skip
        await conn.execute(
            sa.insert(courses).values(
                id=COURSE, name="web", title="Web coding", owner_id="t_tea", created_at=NOON
            )
        )
        await conn.execute(
            sa.insert(members),
            [{"course_id": COURSE, "user_id": s, "role": "student", "added_at": NOON}
             for s in STUDENTS],
        )  # fmt: skip
    try:
        yield database
    finally:
        await database.aclose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def budgets(db: Database, clock: Clock) -> Budgets:
    return Budgets(db, clock=clock)


async def reserve_many(
    budgets: Budgets, count: int, *, tokens: int, cost_micros: int = 0, users: Iterator[str]
) -> tuple[list[Reservation], list[BaseException]]:
    """``count`` reservations at once; the admitted ones and the refusals."""
    calls: list[asyncio.Future[Reservation]] = []
    for i in range(count):
        calls.append(
            asyncio.ensure_future(budgets.reserve(course_id=COURSE, user_id=next(users),
                                                  tokens=tokens, cost_micros=cost_micros))
        )  # fmt: skip
        if i % 10 == 9:  # keep loop steps short: in debug mode a task records its creation stack
            await asyncio.sleep(0)
    results = await asyncio.gather(*calls, return_exceptions=True)
    admitted = [r for r in results if isinstance(r, Reservation)]
    refused = [r for r in results if isinstance(r, BaseException)]
    return admitted, refused


async def settle_exactly(budgets: Budgets, reservation: Reservation, **kwargs: int) -> None:
    """Settle with the real usage equal to the estimate."""
    half = reservation.tokens // 2
    await budgets.settle(
        reservation,
        input_tokens=half,
        output_tokens=reservation.tokens - half,
        cost_micros=reservation.cost_micros,
        **kwargs,
    )


def round_robin(names: tuple[str, ...]) -> Iterator[str]:
    while True:
        yield from names


def only(found: list[Remaining], scope: str) -> Remaining:
    (match,) = [r for r in found if r.scope == scope]
    return match


async def open_reservations(db: Database) -> int:
    async with db.read() as conn:
        query = sa.select(sa.func.count()).where(reservations.c.state == "open")
        return int(await conn.scalar(query) or 0)


# -- admission under concurrency -------------------------------------------------------------


@pytest.mark.parametrize("scope", ["course", "student"])
async def test_100_concurrent_requests_against_a_budget_for_10_admit_exactly_10(
    budgets: Budgets, db: Database, scope: str
) -> None:
    await budgets.set_budget(COURSE, scope=scope, period="day", max_tokens=10_000,
                             max_cost_micros=5_000_000)  # fmt: skip
    users = round_robin(STUDENTS) if scope == "course" else round_robin(STUDENTS[:1])

    admitted, refused = await reserve_many(
        budgets, 100, tokens=1_000, cost_micros=500_000, users=users
    )

    assert len(admitted) == 10
    assert len(refused) == 90
    assert all(isinstance(error, BudgetExceeded) for error in refused)
    await asyncio.gather(*(settle_exactly(budgets, r) for r in admitted))
    (left,) = await budgets.remaining(COURSE, STUDENTS[0])
    assert (left.used_tokens, left.reserved_tokens) == (10_000, 0)
    assert (left.used_cost_micros, left.reserved_cost_micros) == (5_000_000, 0)
    assert left.remaining_tokens == 0
    assert await open_reservations(db) == 0
    rows = await budgets.usage(COURSE)
    assert sum(row.requests for row in rows) == 10
    assert sum(row.input_tokens + row.output_tokens for row in rows) == 10_000


async def test_two_engines_in_one_process_admit_exactly_10(db_url: str, db: Database) -> None:
    """Two ``Database`` objects: separate pools and (on SQLite) separate per-process locks, like
    two workers."""
    clock = Clock()
    await Budgets(db, clock=clock).set_budget(COURSE, scope="course", period="week",
                                              max_tokens=10_000)  # fmt: skip
    other = Database(db_url)
    try:
        sides = [Budgets(db, clock=clock), Budgets(other, clock=clock)]
        outcomes = await asyncio.gather(
            *(reserve_many(side, 50, tokens=1_000, users=round_robin(STUDENTS)) for side in sides)
        )
        admitted = [r for side_admitted, _ in outcomes for r in side_admitted]
        assert len(admitted) == 10
        assert sum(len(refused) for _, refused in outcomes) == 90
        await asyncio.gather(*(settle_exactly(sides[i % 2], r) for i, r in enumerate(admitted)))
        (left,) = await sides[1].remaining(COURSE, STUDENTS[0])
        assert (left.used_tokens, left.reserved_tokens) == (10_000, 0)
    finally:
        await other.aclose()


WORKER = """
import asyncio, json, sys
from agentica_team.budgets import Budgets
from agentica_team.db.engine import Database
from agentica_team.errors import BudgetExceeded

async def main(url, course, count, tokens):
    db = Database(url)
    budgets = Budgets(db)
    await budgets.remaining(course, "warm-up")  # connect before the start signal
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    async def one(i):
        try:
            return await budgets.reserve(course_id=course, user_id=f"w{i}", tokens=tokens,
                                         cost_micros=0)
        except BudgetExceeded:
            return None
    got = [r for r in await asyncio.gather(*(one(i) for i in range(count))) if r]
    for r in got:
        await budgets.settle(r, input_tokens=tokens, output_tokens=0, cost_micros=0)
    await db.aclose()
    print(json.dumps({"admitted": len(got), "refused": count - len(got)}), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


async def test_two_worker_processes_admit_exactly_10(db_url: str, db: Database) -> None:
    budgets = Budgets(db)  # the real clock, like the workers'
    budget = await budgets.set_budget(COURSE, scope="course", period="course", max_tokens=10_000)
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", WORKER, db_url, COURSE, "50", "1000",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]  # fmt: skip
    for worker in workers:
        assert worker.stdout is not None
        assert (await asyncio.wait_for(worker.stdout.readline(), 60)).strip() == b"ready"
    outputs = await asyncio.gather(
        *(asyncio.wait_for(worker.communicate(b"go\n"), 60) for worker in workers)
    )
    results = [json.loads(out) for out, _ in outputs]
    assert all(worker.returncode == 0 for worker in workers)
    assert sum(r["admitted"] for r in results) == 10
    assert sum(r["refused"] for r in results) == 90
    (left,) = await budgets.remaining(COURSE, "anyone")
    assert (left.budget_id, left.used_tokens, left.reserved_tokens) == (budget.id, 10_000, 0)


async def test_a_refused_call_holds_nothing_on_any_budget(budgets: Budgets, db: Database) -> None:
    """The course budget is taken first; the student's then refuses: the course's hold is
    rolled back with it, and no reservation or rate count remains."""
    await budgets.set_budget(COURSE, scope="course", period="day", max_tokens=100_000,
                             requests_per_minute=100, max_concurrent=50)  # fmt: skip
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000)

    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1_500, cost_micros=0)

    assert refused.value.detail["budget"]["scope"] == "student"
    for left in await budgets.remaining(COURSE, "s_ada"):
        assert (left.used_tokens, left.reserved_tokens) == (0, 0)
    async with db.read() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(reservations)) == 0
        assert await conn.scalar(sa.select(sa.func.sum(rate_windows.c.count))) in (None, 0)
        assert await conn.scalar(sa.select(sa.func.sum(budget_usage.c.in_flight))) in (None, 0)


# -- which budgets apply ---------------------------------------------------------------------


async def test_student_budgets_are_per_student_and_the_course_budget_is_shared(
    budgets: Budgets,
) -> None:
    await budgets.set_budget(COURSE, scope="course", period="day", max_tokens=5_000)
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=3_000)

    ada = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=3_000, cost_micros=0)
    await settle_exactly(budgets, ada)
    with pytest.raises(BudgetExceeded) as own:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)
    assert own.value.detail["budget"]["scope"] == "student"

    bob = await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=2_000, cost_micros=0)
    await settle_exactly(budgets, bob)
    with pytest.raises(BudgetExceeded) as shared:
        await budgets.reserve(course_id=COURSE, user_id="s_cy", tokens=1, cost_micros=0)
    assert shared.value.detail["budget"]["scope"] == "course"
    assert "the course's daily budget has 0 of 5,000 tokens left" in shared.value.message

    remaining = await budgets.remaining(COURSE, "s_bob")
    assert [r.scope for r in remaining] == ["course", "student"]
    assert only(remaining, "course").used_tokens == 5_000
    assert only(remaining, "student").used_tokens == 2_000
    assert only(remaining, "student").remaining_tokens == 1_000


async def test_a_student_override_replaces_the_default_student_budget(budgets: Budgets) -> None:
    default = await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000)
    override = await budgets.set_budget(
        COURSE, scope="student", user_id="s_ada", period="week", max_tokens=50_000
    )
    exempt = await budgets.set_budget(COURSE, scope="student", user_id="s_cy", period="day")

    big = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=20_000, cost_micros=0)
    await settle_exactly(budgets, big)
    with pytest.raises(BudgetExceeded):
        await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=20_000, cost_micros=0)
    await budgets.reserve(course_id=COURSE, user_id="s_cy", tokens=10**9, cost_micros=10**9)

    (ada,) = await budgets.remaining(COURSE, "s_ada")
    assert (ada.budget_id, ada.period, ada.used_tokens) == (override.id, "week", 20_000)
    (bob,) = await budgets.remaining(COURSE, "s_bob")
    assert (bob.budget_id, bob.used_tokens, bob.remaining_tokens) == (default.id, 0, 1_000)
    (cy,) = await budgets.remaining(COURSE, "s_cy")
    assert (cy.budget_id, cy.max_tokens, cy.remaining_tokens) == (exempt.id, None, None)


async def test_without_budgets_calls_are_admitted_and_still_counted(budgets: Budgets) -> None:
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10**6, cost_micros=7)
    await budgets.settle(call, input_tokens=10, output_tokens=5, cost_micros=3)
    assert await budgets.remaining(COURSE, "s_ada") == []
    (row,) = await budgets.usage(COURSE)
    assert (row.user_id, row.requests, row.input_tokens, row.output_tokens) == ("s_ada", 1, 10, 5)


# -- periods ---------------------------------------------------------------------------------


def test_period_keys_and_resets() -> None:
    tuesday = NOON
    assert period_key("day", tuesday) == "2026-11-24"
    assert period_key("week", tuesday) == "2026-W48"
    assert period_key("course", tuesday) == "all"
    assert period_resets_at("day", tuesday) == datetime(2026, 11, 25, tzinfo=UTC).timestamp()
    assert period_resets_at("week", tuesday) == datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert period_resets_at("course", tuesday) is None
    new_year = datetime(2027, 1, 1, tzinfo=UTC).timestamp()  # a Friday in ISO week 2026-W53
    assert period_key("week", new_year) == "2026-W53"
    sunday_night = datetime(2026, 11, 29, 23, 59, 59, tzinfo=UTC).timestamp()
    assert period_resets_at("week", sunday_night) == datetime(2026, 11, 30, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("period", "still_full", "reset"),
    [
        ("day", "2026-11-24T23:59:59", "2026-11-25T00:00:00"),
        ("week", "2026-11-29T23:59:59", "2026-11-30T00:00:00"),
        ("course", "2027-06-30T12:00:00", None),
    ],
)
async def test_periods_roll_over(
    budgets: Budgets, clock: Clock, period: str, still_full: str, reset: str | None
) -> None:
    await budgets.set_budget(COURSE, scope="student", period=period, max_tokens=1_000)
    await settle_exactly(
        budgets, await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1_000,
                                       cost_micros=0)
    )  # fmt: skip

    clock.at(still_full)
    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)
    assert refused.value.detail["resets_at"] == (reset and reset + "Z")
    if reset is None:
        assert "it does not reset; ask the teacher to raise it" in refused.value.message
        return
    clock.at(reset)
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1_000, cost_micros=0)
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens) == (0, 1_000)
    await budgets.release(call)


async def test_a_call_across_midnight_settles_where_it_reserved(
    budgets: Budgets, clock: Clock
) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000)
    clock.at("2026-11-24T23:59:50")
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=800, cost_micros=0)
    clock.at("2026-11-25T00:00:20")
    await budgets.settle(call, input_tokens=500, output_tokens=200, cost_micros=0)

    (today,) = await budgets.remaining(COURSE, "s_ada")
    assert (today.used_tokens, today.reserved_tokens) == (0, 0)
    clock.at("2026-11-24T23:59:59")
    (yesterday,) = await budgets.remaining(COURSE, "s_ada")
    assert (yesterday.used_tokens, yesterday.reserved_tokens) == (700, 0)
    (row,) = await budgets.usage(COURSE)
    assert row.day == "2026-11-24"


# -- money, concurrency, rate ----------------------------------------------------------------


async def test_cost_budgets_in_micro_dollars(budgets: Budgets) -> None:
    await budgets.set_budget(COURSE, scope="course", period="week", max_cost_micros=5_000_000)
    for _ in range(2):
        call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10_000,
                                     cost_micros=2_000_000)  # fmt: skip
        await budgets.settle(call, input_tokens=9_000, output_tokens=900, cost_micros=1_999_999)

    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=1, cost_micros=1_000_003)

    error = refused.value
    assert error.message == (
        "this call needs up to $1.000003 but the course's weekly budget has $1.000002 of "
        "$5.00 left; it resets at 2026-11-30T00:00:00Z"
    )
    assert error.detail["unit"] == "cost_micros"
    assert error.detail["remaining_cost_micros"] == 1_000_002
    assert error.detail["remaining_tokens"] is None
    fits = await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=1,
                                 cost_micros=1_000_002)  # fmt: skip
    await budgets.release(fits)


async def test_max_concurrent_limits_calls_in_progress(budgets: Budgets) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_concurrent=2)
    first = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10, cost_micros=0)
    await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10, cost_micros=0)

    with pytest.raises(RateLimited) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10, cost_micros=0)
    assert refused.value.detail["limit"] == {"max_concurrent": 2}
    assert refused.value.detail["retry_after"] >= 1
    assert "2 model calls in progress" in refused.value.message
    await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=10, cost_micros=0)

    await settle_exactly(budgets, first)
    await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10, cost_micros=0)


async def test_requests_per_minute(budgets: Budgets, clock: Clock) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000,
                             requests_per_minute=3)  # fmt: skip
    clock.at("2026-11-24T12:00:10")
    # a call refused by the budget is not counted: nothing of a refused call is kept
    with pytest.raises(BudgetExceeded):
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=5_000, cost_micros=0)
    for _ in range(3):
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)

    with pytest.raises(RateLimited) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)
    assert refused.value.detail["retry_after"] == 50
    assert refused.value.detail["limit"] == {"requests_per_minute": 3}
    assert "retry in 50 s" in refused.value.message
    await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=1, cost_micros=0)

    clock.at("2026-11-24T12:01:00")
    await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)


# -- settling, releasing, crashes ------------------------------------------------------------


async def test_settle_and_release_are_idempotent(budgets: Budgets) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000,
                             max_concurrent=5)  # fmt: skip
    settled = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=400, cost_micros=0)
    released = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=300, cost_micros=0)

    for _ in range(2):
        await budgets.settle(settled, input_tokens=100, output_tokens=50, cost_micros=0)
        await budgets.release(settled)
        await budgets.release(released)
        await budgets.settle(released, input_tokens=100, output_tokens=50, cost_micros=0)

    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens) == (150, 0)
    (row,) = await budgets.usage(COURSE)
    assert (row.requests, row.input_tokens, row.output_tokens) == (1, 100, 50)


async def test_real_usage_above_the_estimate_still_counts(budgets: Budgets) -> None:
    """The gateway caps output at the estimate, but if a provider bills more, the truth is kept
    and the next call is refused."""
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000)
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=900, cost_micros=0)
    await budgets.settle(call, input_tokens=900, output_tokens=300, cost_micros=0)
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens, left.remaining_tokens) == (1_200, 0, 0)
    with pytest.raises(BudgetExceeded, match="has 0 of 1,000 tokens left"):
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)


async def test_concurrent_double_settles_count_once(budgets: Budgets, db: Database) -> None:
    await budgets.set_budget(COURSE, scope="course", period="day", max_tokens=100_000)
    calls, _ = await reserve_many(budgets, 10, tokens=1_000, users=round_robin(STUDENTS))
    await asyncio.gather(*(settle_exactly(budgets, c) for c in calls for _ in range(3)))
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens) == (10_000, 0)
    async with db.read() as conn:
        assert await conn.scalar(sa.select(sa.func.sum(budget_usage.c.in_flight))) == 0


async def test_a_crashed_calls_reservation_is_released(
    budgets: Budgets, clock: Clock, db: Database
) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000,
                             max_concurrent=1)  # fmt: skip
    crashed = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=900, cost_micros=0)

    clock.now += 30
    assert await budgets.release_stale(older_than=60) == 0
    with pytest.raises(RateLimited):
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=10, cost_micros=0)

    clock.now += 60
    assert await budgets.release_stale(older_than=60) == 1
    assert await budgets.release_stale(older_than=60) == 0
    assert await open_reservations(db) == 0
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens) == (0, 0)
    after = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=900, cost_micros=0)
    await budgets.release(after)

    # the "crashed" call was only slow: its usage still counts when it settles, once
    for _ in range(2):
        await budgets.settle(crashed, input_tokens=600, output_tokens=100, cost_micros=0)
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.reserved_tokens) == (700, 0)
    async with db.read() as conn:
        assert await conn.scalar(sa.select(sa.func.sum(budget_usage.c.in_flight))) == 0


async def test_release_stale_forgets_finished_reservations_and_old_rate_windows(
    budgets: Budgets, clock: Clock, db: Database
) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", requests_per_minute=10)
    await settle_exactly(
        budgets, await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=5, cost_micros=0)
    )
    clock.now += 3_600
    await budgets.release_stale(older_than=600)
    async with db.read() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(reservations)) == 0
        assert await conn.scalar(sa.select(sa.func.count()).select_from(rate_windows)) == 0


# -- the refusal -----------------------------------------------------------------------------


async def test_the_refusal_says_what_is_left_and_when_it_resets(budgets: Budgets) -> None:
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=10_000)
    used = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=9_000, cost_micros=0)
    await settle_exactly(budgets, used)
    await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=200, cost_micros=0)

    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1_200, cost_micros=0)

    error = refused.value
    assert error.message == (
        "this call needs up to 1,200 tokens but the student's daily budget has 800 of 10,000 "
        "tokens left (200 more are held by calls in progress); it resets at 2026-11-25T00:00:00Z"
    )
    body = error.body()["error"]
    assert body["type"] == "budget_exceeded"
    assert body["budget"]["scope"] == "student"
    assert body["budget"]["period"] == "day"
    assert (body["limit"], body["used"], body["reserved"], body["needed"]) == (
        10_000, 9_000, 200, 1_200
    )  # fmt: skip
    assert (body["remaining_tokens"], body["remaining_cost_micros"]) == (800, None)
    assert body["resets_at"] == "2026-11-25T00:00:00Z"
    assert error.status == 429
    json.dumps(body)


async def test_a_call_larger_than_the_whole_budget_is_refused(budgets: Budgets) -> None:
    await budgets.set_budget(COURSE, scope="student", period="week", max_tokens=10_000)
    with pytest.raises(BudgetExceeded) as refused:
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=12_000, cost_micros=0)
    assert refused.value.message.startswith(
        "this call needs up to 12,000 tokens but the student's weekly budget is 10,000 tokens in "
        "total; ask for fewer output tokens"
    )
    assert refused.value.detail["remaining_tokens"] == 10_000


# -- usage and savings -----------------------------------------------------------------------


async def test_usage_per_student_per_course_per_day(budgets: Budgets, clock: Clock) -> None:
    async def call(user: str, tokens: int, *, cached: int = 0, source: str = "gateway") -> None:
        reservation = await budgets.reserve(course_id=COURSE, user_id=user, tokens=tokens,
                                            cost_micros=tokens * 2)  # fmt: skip
        await budgets.settle(reservation, input_tokens=tokens - 10, output_tokens=10,
                             cost_micros=tokens, cached_tokens=cached, source=source)  # fmt: skip

    clock.at("2026-11-23T09:00:00")
    await call("s_ada", 100, cached=40)
    await call("s_ada", 200, cached=60)
    await call("s_bob", 300, source="agent")
    await budgets.add_compaction_savings(COURSE, "s_bob", 5_000)
    clock.at("2026-11-24T09:00:00")
    await call("s_ada", 400)
    await budgets.add_compaction_savings(COURSE, "s_ada", 700, source="gateway")
    await budgets.add_compaction_savings(COURSE, "s_ada", 0)

    rows = await budgets.usage(COURSE)
    assert [(r.day, r.user_id, r.source) for r in rows] == [
        ("2026-11-23", "s_ada", "gateway"),
        ("2026-11-23", "s_bob", "agent"),
        ("2026-11-24", "s_ada", "gateway"),
    ]
    ada_monday = rows[0]
    assert (ada_monday.requests, ada_monday.input_tokens, ada_monday.output_tokens) == (2, 280, 20)
    assert (ada_monday.cost_micros, ada_monday.cached_tokens) == (300, 100)
    assert (rows[1].requests, rows[1].compaction_saved_tokens) == (1, 5_000)
    assert (rows[2].requests, rows[2].compaction_saved_tokens) == (1, 700)

    ada = await budgets.usage(COURSE, user_id="s_ada")
    assert [r.day for r in ada] == ["2026-11-23", "2026-11-24"]
    tuesday = await budgets.usage(COURSE, since="2026-11-24", until="2026-11-24")
    assert [(r.user_id, r.input_tokens) for r in tuesday] == [("s_ada", 390)]
    assert await budgets.usage(COURSE, until="2026-11-22") == []
    assert await budgets.usage("c_other") == []


# -- budgets themselves ----------------------------------------------------------------------


async def test_set_list_and_delete_budgets(budgets: Budgets, clock: Clock) -> None:
    first = await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=1_000)
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=500, cost_micros=0)
    await settle_exactly(budgets, call)
    clock.now += 5
    again = await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=2_000,
                                     max_concurrent=3)  # fmt: skip
    assert again.id == first.id
    assert (again.max_tokens, again.max_concurrent, again.updated_at) == (2_000, 3, clock.now)
    (left,) = await budgets.remaining(COURSE, "s_ada")
    assert (left.used_tokens, left.remaining_tokens) == (500, 1_500)

    course = await budgets.set_budget(COURSE, scope="course", period="course", max_cost_micros=10)
    ada = await budgets.set_budget(COURSE, scope="student", user_id="s_ada", period="day",
                                   max_tokens=5)  # fmt: skip
    assert [b.id for b in await budgets.list_budgets(COURSE)] == [course.id, first.id, ada.id]

    pending = await budgets.reserve(course_id=COURSE, user_id="s_bob", tokens=5, cost_micros=1)
    assert await budgets.delete_budget("c_other", first.id) is False
    assert await budgets.delete_budget(COURSE, first.id) is True
    assert await budgets.delete_budget(COURSE, first.id) is False
    await settle_exactly(budgets, pending)  # its student budget is gone: no error
    assert [b.id for b in await budgets.list_budgets(COURSE)] == [course.id, ada.id]
    assert [r.budget_id for r in await budgets.remaining(COURSE, "s_bob")] == [course.id]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": "class", "period": "day", "max_tokens": 1}, "scope must be 'course' or"),
        ({"scope": "course", "period": "month", "max_tokens": 1}, "period must be 'day', 'week'"),
        ({"scope": "course", "user_id": "s_ada", "period": "day", "max_tokens": 1},
         "a course budget covers the whole class"),
        ({"scope": "student", "period": "day", "max_tokens": -1}, "max_tokens must be between 0"),
        ({"scope": "student", "period": "day", "max_cost_micros": True}, "whole number or null"),
        ({"scope": "student", "period": "day", "max_tokens": 1.5}, "whole number or null"),
        ({"scope": "student", "period": "day", "max_tokens": 2**63}, "must be between"),
        ({"scope": "student", "period": "day", "requests_per_minute": 0},
         "requests_per_minute must be between 1"),
        ({"scope": "student", "period": "day", "max_concurrent": 0}, "max_concurrent must be"),
        ({"scope": "student", "period": "day"}, "set at least one of max_tokens"),
        ({"scope": "course", "period": "day"}, "set at least one of max_tokens"),
        ({"scope": "student", "user_id": "t_nobody", "period": "day", "max_tokens": 1},
         "is not a member of this course"),
    ],
)  # fmt: skip
async def test_invalid_budgets_are_refused_with_the_reason(
    budgets: Budgets, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(BadRequest) as refused:
        await budgets.set_budget(COURSE, **kwargs)  # type: ignore[arg-type]
    assert message in refused.value.message
    assert await budgets.list_budgets(COURSE) == []


async def test_unknown_courses_and_bad_arguments(budgets: Budgets) -> None:
    with pytest.raises(NotFound, match="no course 'c_missing'"):
        await budgets.set_budget("c_missing", scope="course", period="day", max_tokens=1)
    for since, until in [("2026-13-01", None), ("24.11.2026", None), (None, "20261124")]:
        with pytest.raises(BadRequest, match="must be a date as YYYY-MM-DD"):
            await budgets.usage(COURSE, since=since, until=until)
    with pytest.raises(BadRequest, match="is after until"):
        await budgets.usage(COURSE, since="2026-11-25", until="2026-11-24")
    with pytest.raises(UsageError, match="tokens must be a whole number"):
        await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=-1, cost_micros=0)
    call = await budgets.reserve(course_id=COURSE, user_id="s_ada", tokens=1, cost_micros=0)
    with pytest.raises(UsageError, match="source must be"):
        await budgets.settle(call, input_tokens=1, output_tokens=0, cost_micros=0, source="")
    with pytest.raises(UsageError, match="cost_micros must be"):
        await budgets.settle(call, input_tokens=1, output_tokens=0, cost_micros=-5)


async def test_budget_changes_are_audited_in_their_transaction(db: Database) -> None:
    audit = Audit(db)
    budgets = Budgets(db, audit=audit)
    info = await budgets.set_budget(
        COURSE, scope="course", period="day", max_tokens=500, actor="t_tea"
    )
    with pytest.raises(BadRequest):  # refused: nothing changed, nothing audited
        await budgets.set_budget(COURSE, scope="student", user_id="nobody", period="day",
                                 max_tokens=1, actor="t_tea")  # fmt: skip
    assert await budgets.delete_budget(COURSE, info.id, actor="t_tea")
    assert not await budgets.delete_budget(COURSE, info.id, actor="t_tea")
    records = await audit.search(course_id=COURSE)
    assert [(r.kind, r.actor_id, r.subject) for r in records] == [
        ("budget_set", "t_tea", info.id),
        ("budget_deleted", "t_tea", info.id),
    ]
    assert records[0].data["max_tokens"] == 500
    (report,) = await audit.verify(COURSE)
    assert report.ok and report.records == 2
    await audit.aclose()
