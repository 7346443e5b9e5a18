"""The audit: hash chains that survive concurrent writers and show every kind of tampering.

Runs on a real SQLite file and on a real PostgreSQL database (the session's throw-away cluster).
Tampering is done for real, with SQL on ``team_audit`` / ``team_audit_heads`` behind the
service's back; ``verify`` must name the first bad record.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import secrets
import shutil
from collections.abc import AsyncIterator, Coroutine, Iterable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from agentica_team.audit import (
    MAX_DATA_BYTES,
    ZERO_HASH,
    Audit,
    AuditRecord,
    ChainReport,
    record_hash,
)
from agentica_team.db.engine import Database
from agentica_team.errors import BadRequest
from tests.postgres import Cluster

COURSE = "c_course"
FIELDS = ["chain", "seq", "ts", "actor_id", "kind", "subject", "data", "prev_hash", "hash"]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.25) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def upgraded(url: str) -> None:
    database = Database(url)
    await database.upgrade()
    await database.aclose()


# The schema is made once per session and copied for each test: the migrations run on the
# event loop (alembic under run_sync) and would trip the blocked-loop check on a busy machine.
@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "template.db"
    asyncio.run(upgraded(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def pg_template(pg_cluster: Cluster) -> str:
    asyncio.run(upgraded(pg_cluster.create_database("audit_template")))
    return "audit_template"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, tmp_path / "team.db")
        return f"sqlite+aiosqlite:///{tmp_path / 'team.db'}"
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    template_name = request.getfixturevalue("pg_template")
    name = f"audit_{secrets.token_hex(6)}"
    cluster.psql(f'CREATE DATABASE "{name}" TEMPLATE "{template_name}"')
    return cluster.url(name)


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    yield database
    await database.aclose()


@pytest.fixture
async def audit(db: Database) -> AsyncIterator[Audit]:
    log = Audit(db)
    yield log
    await log.aclose()


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


async def sql(db: Database, statement: str, **params: Any) -> list[Any]:
    """One statement on the audit's database, as someone with database access would run it."""
    async with db.engine.begin() as conn:
        result = await conn.execute(sa.text(statement), params)
        return list(result) if result.returns_rows else []


async def gathered(calls: Iterable[Coroutine[Any, Any, AuditRecord]]) -> list[AuditRecord]:
    """``asyncio.gather(*calls)``, the tasks started 10 per loop step (creating hundreds at
    once in the blocked-loop check's debug mode makes one step long on a busy machine)."""
    tasks = []
    for i, call in enumerate(calls):
        tasks.append(asyncio.create_task(call))
        if i % 10 == 9:
            await asyncio.sleep(0)
    return list(await asyncio.gather(*tasks))


async def record_many(audit: Audit, n: int, chain: str = COURSE) -> list[AuditRecord]:
    """``n`` records written concurrently (the writer batches them)."""
    return await gathered(audit.record("k", course_id=chain, data={"i": i}) for i in range(n))


async def fill(audit: Audit, n: int, chain: str = COURSE) -> list[AuditRecord]:
    return [
        await audit.record("tool.call", actor_id=f"u_{i % 3}", course_id=chain, data={"i": i})
        for i in range(n)
    ]


async def report(audit: Audit, chain: str = COURSE) -> ChainReport:
    (result,) = await audit.verify(chain)
    assert result.chain == chain
    return result


async def assert_broken(audit: Audit, first_bad_seq: int, words: str) -> None:
    result = await report(audit)
    assert not result.ok
    assert result.first_bad_seq == first_bad_seq, result
    assert result.problem is not None and words in result.problem, result.problem


# -- the hash --------------------------------------------------------------------------------


def test_record_hash_is_sha256_of_the_canonical_json() -> None:
    data = {"b": [1, 2.5, None, True], "a": "caf\u00e9 \U0001f600", "z": {"y": "x"}}
    data_json = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    fields = {
        "chain": "c_1",
        "seq": 7,
        "ts": 1_700_000_000.123456,
        "actor_id": "u_\u00e9",
        "kind": "model.call",
        "subject": 'a "quoted" subject',
        "data": data,
        "prev_hash": "ab" * 32,
    }
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    expected = hashlib.sha256(canonical.encode()).hexdigest()
    arguments = {**fields, "data_json": data_json}
    del arguments["data"]
    assert record_hash(**arguments) == expected


# -- appending -------------------------------------------------------------------------------


async def test_appends_form_one_chain_per_course(db: Database) -> None:
    clock = Clock()
    audit = Audit(db, clock=clock)
    first = await audit.record(
        "login", actor_id="u_admin", subject="u_admin", data={"ip": "127.0.0.1"}
    )
    records = [first]
    for i in range(3):
        clock.now += 1
        records.append(
            await audit.record("instruction", actor_id="u_s", course_id=COURSE, data={"n": i})
        )
    await audit.aclose()

    assert (first.chain, first.seq, first.prev_hash) == ("", 1, ZERO_HASH)
    course = records[1:]
    assert [r.seq for r in course] == [1, 2, 3]
    assert course[0].prev_hash == ZERO_HASH
    assert [r.prev_hash for r in course[1:]] == [r.hash for r in course[:-1]]
    assert [r.ts for r in course] == [clock.now - 2, clock.now - 1, clock.now]
    for r in records:
        assert r.hash == record_hash(
            r.chain, r.seq, r.ts, r.actor_id, r.kind, r.subject, canonical(r.data), r.prev_hash
        )
    heads = dict(
        (chain, (seq, digest))
        for chain, seq, digest in await sql(db, "SELECT chain, seq, hash FROM team_audit_heads")
    )
    assert heads == {"": (1, first.hash), COURSE: (3, course[-1].hash)}

    reports = await Audit(db).verify()
    assert [(r.chain, r.records, r.ok, r.problem) for r in reports] == [
        ("", 1, True, None),
        (COURSE, 3, True, None),
    ]
    assert reports[1].head_hash == course[-1].hash
    assert await Audit(db).verify("c_nothing") == [ChainReport("c_nothing", 0, True, None, None)]
    assert (await Audit(db).search(course_id=COURSE, limit=10)) == course


async def test_record_in_commits_or_rolls_back_with_the_callers_transaction(
    db: Database, audit: Audit
) -> None:
    with pytest.raises(RuntimeError, match="the action failed"):
        async with db.write() as conn:
            await audit.record_in(conn, "budget.set", actor_id="u_t", course_id=COURSE)
            raise RuntimeError("the action failed")
    assert await audit.search(course_id=COURSE) == []
    assert await sql(db, "SELECT count(*) FROM team_audit_heads") == [(0,)]

    async with db.write() as conn:
        one = await audit.record_in(conn, "budget.set", actor_id="u_t", course_id=COURSE)
        two = await audit.record_in(conn, "budget.set", actor_id="u_t", course_id=COURSE)
    assert (one.seq, two.seq, two.prev_hash) == (1, 2, one.hash)
    assert await audit.search(course_id=COURSE) == [one, two]
    assert (await report(audit)).ok


async def test_concurrent_appends_from_several_writers_keep_one_valid_chain(
    db_url: str, db: Database, audit: Audit
) -> None:
    # a second Database is a second pool of connections, as a second worker process has
    other_db = Database(db_url)
    other = Audit(other_db)

    async def in_transaction(i: int) -> AuditRecord:
        async with db.write() as conn:
            return await audit.record_in(conn, "budget.set", course_id=COURSE, data={"i": i})

    try:
        calls = [
            (audit if i % 2 else other).record(
                "model.call", actor_id=f"u_{i}", course_id=COURSE if i % 3 else "", data={"i": i}
            )
            for i in range(200)
        ]
        calls += [in_transaction(1000 + i) for i in range(20)]
        records = await gathered(calls)
    finally:
        await other.aclose()
        await other_db.aclose()

    for chain in ("", COURSE):
        seqs = sorted(r.seq for r in records if r.chain == chain)
        assert seqs == list(range(1, len(seqs) + 1))
    reports = await audit.verify()
    assert [(r.chain, r.ok) for r in reports] == [("", True), (COURSE, True)]
    assert sum(r.records for r in reports) == 220
    stored = await audit.search(course_id=COURSE, limit=1000)
    assert sorted(stored, key=lambda r: r.seq) == sorted(
        (r for r in records if r.chain == COURSE), key=lambda r: r.seq
    )


async def test_aclose_writes_what_is_queued_then_refuses(db: Database) -> None:
    audit = Audit(db)
    tasks = [asyncio.create_task(audit.record("k", course_id=COURSE)) for _ in range(30)]
    await asyncio.sleep(0)
    abandoned = asyncio.create_task(audit.record("abandoned", course_id=COURSE))
    await asyncio.sleep(0)
    abandoned.cancel()  # the caller stops waiting; the record is written all the same
    await audit.aclose()
    assert len(await asyncio.gather(*tasks)) == 30
    assert len(await audit.search(course_id=COURSE)) == 31
    assert abandoned.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        await audit.record("k")


REFUSE_POISON = {
    "sqlite": [
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON team_audit WHEN NEW.kind = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN "
        "IF NEW.kind = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF; "
        "RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON team_audit "
        "FOR EACH ROW EXECUTE FUNCTION refuse_poison()",
    ],
}


async def test_one_bad_record_does_not_fail_the_rest_of_its_batch(
    db: Database, audit: Audit
) -> None:
    # a trigger refuses one record: its batch fails as a whole, then each record is written
    # on its own
    for statement in REFUSE_POISON[db.dialect]:
        await sql(db, statement)
    outcomes = await asyncio.gather(
        *(audit.record("poison" if i == 7 else "ok", course_id=COURSE) for i in range(20)),
        return_exceptions=True,
    )
    assert [isinstance(o, Exception) for o in outcomes] == [i == 7 for i in range(20)]
    assert "poison refused" in str(outcomes[7])
    assert (await report(audit)).records == 19
    assert (await report(audit)).ok


# -- tampering -------------------------------------------------------------------------------

ALTERATIONS = {
    "chain": ("chain", "'c_other'"),
    "seq": ("seq", "seq + 1000"),
    "ts": ("ts", "ts + 1"),
    "actor_id": ("actor_id", "'u_someone_else'"),
    "kind": ("kind", "'login'"),
    "subject": ("subject", "'nothing to see'"),
    "data": ("data", "'[1]'"),
    "data_spacing": ("data", "replace(data, ':', ': ')"),
    "prev_hash": ("prev_hash", "'" + "1" * 64 + "'"),
    "hash": ("hash", "'" + "2" * 64 + "'"),
}


@pytest.mark.parametrize("alteration", sorted(ALTERATIONS))
async def test_verify_finds_an_altered_field(db: Database, audit: Audit, alteration: str) -> None:
    await fill(audit, 10)
    column, value = ALTERATIONS[alteration]
    await sql(
        db, f"UPDATE team_audit SET {column} = {value} WHERE chain = :c AND seq = 5", c=COURSE
    )
    words = "missing" if column in ("chain", "seq") else "altered"
    await assert_broken(audit, 5, words)


async def test_verify_survives_values_of_the_wrong_type(db: Database, audit: Audit) -> None:
    if db.dialect != "sqlite":
        pytest.skip("PostgreSQL's column types refuse these values")
    await fill(audit, 6)
    await sql(db, "UPDATE team_audit SET ts = 'yesterday' WHERE chain = :c AND seq = 3", c=COURSE)
    await sql(db, "UPDATE team_audit SET data = x'7b7d' WHERE chain = :c AND seq = 5", c=COURSE)
    await assert_broken(audit, 3, "altered")
    await sql(db, "UPDATE team_audit SET seq = 'three' WHERE chain = :c AND seq = 3", c=COURSE)
    await assert_broken(audit, 3, "missing")
    await sql(db, "UPDATE team_audit SET ts = 1e300, data = 'NaN' WHERE seq = 4")
    shown = await audit.search(course_id=COURSE)  # what was altered shows, and nothing fails
    by_seq = {r.seq: r for r in shown}
    assert (by_seq[0].ts, by_seq[0].data) == (0.0, {"i": 2})  # seq 'three', ts 'yesterday'
    assert (by_seq[4].ts, by_seq[4].data) == (1e300, {"unreadable": "NaN"})
    assert by_seq[5].data == {}  # the blob x'7b7d' reads as {}
    exported = await collect(audit.export(course_id=COURSE, fmt="csv"))
    assert exported.count(b"\r\n") == 7


async def rehash(db: Database, seq: int, **changes: Any) -> None:
    """Change record ``seq`` and store a hash that fits its new fields (what a careful forger
    does: the record itself then looks fine)."""
    ((row),) = await sql(
        db, "SELECT * FROM team_audit WHERE chain = :c AND seq = :s", c=COURSE, s=seq
    )
    fields = {name: getattr(row, name) for name in FIELDS} | changes
    digest = record_hash(
        fields["chain"],
        fields["seq"],
        fields["ts"],
        fields["actor_id"],
        fields["kind"],
        fields["subject"],
        fields["data"],
        fields["prev_hash"],
    )
    assignments = ", ".join(f"{name} = :{name}" for name in changes)
    await sql(
        db,
        f"UPDATE team_audit SET {assignments}, hash = :hash WHERE chain = :c AND seq = :s",
        c=COURSE,
        s=seq,
        hash=digest,
        **changes,
    )


async def test_verify_finds_an_altered_record_whose_hash_was_recomputed(
    db: Database, audit: Audit
) -> None:
    await fill(audit, 10)
    await rehash(db, 5, data='{"i":99}')
    await assert_broken(audit, 6, "does not follow record seq 5")


async def test_verify_finds_an_altered_last_record_whose_hash_was_recomputed(
    db: Database, audit: Audit
) -> None:
    await fill(audit, 10)
    await rehash(db, 10, kind="nothing")
    await assert_broken(audit, 10, "does not match the chain's head")


@pytest.mark.parametrize(("seq", "words"), [(1, "missing"), (5, "missing"), (10, "removed")])
async def test_verify_finds_a_removed_record(
    db: Database, audit: Audit, seq: int, words: str
) -> None:
    await fill(audit, 10)
    await sql(db, "DELETE FROM team_audit WHERE chain = :c AND seq = :s", c=COURSE, s=seq)
    await assert_broken(audit, seq, words)


async def test_verify_finds_the_last_records_removed_and_the_head_rolled_back_by_seq_only(
    db: Database, audit: Audit
) -> None:
    await fill(audit, 10)
    await sql(db, "DELETE FROM team_audit WHERE chain = :c AND seq > 8", c=COURSE)
    await sql(db, "UPDATE team_audit_heads SET seq = 8 WHERE chain = :c", c=COURSE)
    await assert_broken(audit, 8, "does not match the chain's head")


async def test_verify_finds_swapped_records(db: Database, audit: Audit) -> None:
    await fill(audit, 10)
    await sql(db, "UPDATE team_audit SET seq = -4 WHERE chain = :c AND seq = 4", c=COURSE)
    await sql(db, "UPDATE team_audit SET seq = 4 WHERE chain = :c AND seq = 5", c=COURSE)
    await sql(db, "UPDATE team_audit SET seq = 5 WHERE chain = :c AND seq = -4", c=COURSE)
    await assert_broken(audit, 4, "altered")


async def test_verify_finds_records_reordered_by_id(db: Database, audit: Audit) -> None:
    records = await fill(audit, 10)
    a, b = records[3].id, records[4].id
    await sql(db, "UPDATE team_audit SET id = -1 WHERE id = :a", a=a)
    await sql(db, "UPDATE team_audit SET id = :a WHERE id = :b", a=a, b=b)
    await sql(db, "UPDATE team_audit SET id = :b WHERE id = -1", b=b)
    await assert_broken(audit, 5, "out of order")


async def test_verify_finds_a_record_added_after_the_head(db: Database, audit: Audit) -> None:
    records = await fill(audit, 10)
    last = records[-1]
    data = '{"i":10}'
    digest = record_hash(COURSE, 11, last.ts + 1, "u_0", "tool.call", "", data, last.hash)
    await sql(
        db,
        "INSERT INTO team_audit (chain, seq, ts, actor_id, kind, subject, data, prev_hash, "
        "hash) VALUES (:c, 11, :ts, 'u_0', 'tool.call', '', :d, :p, :h)",
        c=COURSE,
        ts=last.ts + 1,
        d=data,
        p=last.hash,
        h=digest,
    )
    await assert_broken(audit, 11, "added")


async def test_verify_finds_a_record_inserted_in_the_middle(db: Database, audit: Audit) -> None:
    records = await fill(audit, 10)
    for seq in range(10, 4, -1):
        await sql(
            db, "UPDATE team_audit SET seq = seq + 1 WHERE chain = :c AND seq = :s", c=COURSE, s=seq
        )
    await sql(db, "UPDATE team_audit_heads SET seq = 11 WHERE chain = :c", c=COURSE)
    data = '{"i":"forged"}'
    prev = records[3].hash
    digest = record_hash(COURSE, 5, records[3].ts, "u_0", "tool.call", "", data, prev)
    await sql(
        db,
        "INSERT INTO team_audit (chain, seq, ts, actor_id, kind, subject, data, prev_hash, "
        "hash) VALUES (:c, 5, :ts, 'u_0', 'tool.call', '', :d, :p, :h)",
        c=COURSE,
        ts=records[3].ts,
        d=data,
        p=prev,
        h=digest,
    )
    # the forged record fits its predecessor; the one after it no longer fits its own hash
    await assert_broken(audit, 6, "altered")


async def test_a_deleted_head_is_reported_then_restored_with_a_record_saying_so(
    db: Database, audit: Audit
) -> None:
    await fill(audit, 4)
    await sql(db, "DELETE FROM team_audit_heads WHERE chain = :c", c=COURSE)
    result = await report(audit)
    assert not result.ok and result.records == 4
    assert result.problem is not None and "head row is missing" in result.problem

    record = await audit.record("tool.call", course_id=COURSE)
    assert record.seq == 6
    (restored,) = await audit.search(course_id=COURSE, kind="audit.head_restored")
    assert restored.seq == 5 and restored.data["seq"] == 4
    assert (await report(audit)).ok


async def test_verify_streams_long_chains_in_pages(db: Database, audit: Audit) -> None:
    records = await record_many(audit, 1300)  # verify reads pages of 1000
    last = max(records, key=lambda r: r.seq)
    assert (await report(audit)) == ChainReport(COURSE, 1300, True, None, None, last.hash)
    await sql(db, "UPDATE team_audit SET ts = 0 WHERE chain = :c AND seq = 1234", c=COURSE)
    result = await report(audit)
    assert (result.ok, result.records, result.first_bad_seq) == (False, 1233, 1234)


# -- what is stored --------------------------------------------------------------------------


async def test_tokens_and_keys_in_data_are_redacted_before_hashing_and_storing(
    db: Database, audit: Audit
) -> None:
    token = "agt_" + secrets.token_urlsafe(32)
    key = "sk-proj-" + secrets.token_urlsafe(24)
    record = await audit.record(
        "tool.result",
        course_id=COURSE,
        subject=f"curl -H 'Authorization: Bearer {key}'",
        data={
            "output": f"export OPENAI_API_KEY={key}\nyour token: {token}",
            "nested": [{"args": ["--token", token]}, ("tuple", key)],
            token: "a token as a key",
        },
    )
    rows = await sql(db, "SELECT * FROM team_audit")
    stored = json.dumps([list(row) for row in rows])
    assert token not in stored and key not in stored
    assert token[:12] not in stored and key[:12] not in stored
    assert "[redacted]" in record.data["output"]
    assert record.data["nested"] == [
        {"args": ["--token", "[redacted]"]},
        ["tuple", "[redacted]"],
    ]
    assert "[redacted]" in record.subject
    assert (await audit.search(course_id=COURSE)) == [record]
    assert (await report(audit)).ok


async def test_oversized_data_is_cut_with_a_marker(db: Database, audit: Audit) -> None:
    big = "x" * 3_000_000
    record = await audit.record(
        "tool.result", course_id=COURSE, data={"output": big, "exit": 0, "small": "kept"}
    )
    (stored,) = await sql(db, "SELECT data FROM team_audit")
    assert len(stored.data) <= MAX_DATA_BYTES
    assert record.data["exit"] == 0 and record.data["small"] == "kept"
    assert record.data["output"].startswith("xxxx")
    assert record.data["output"].endswith("more characters]")
    assert "[cut: " in record.data["output"]

    many = await audit.record(
        "tool.result", course_id=COURSE, data={"lines": [f"line {i}" for i in range(50_000)]}
    )
    assert len(json.dumps(many.data)) <= MAX_DATA_BYTES
    assert "too large" in many.data["cut"] and many.data["preview"].startswith('{"lines":')

    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100):
        node["d"] = {}
        node = node["d"]
    nested = await audit.record("k", course_id=COURSE, data=deep)
    assert "nested deeper" in json.dumps(nested.data)
    assert [r.data for r in await audit.search(course_id=COURSE)] == [
        record.data,
        many.data,
        nested.data,
    ]
    assert (await report(audit)).ok


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"blob": b"bytes"}, "data['blob'] is a bytes"),
        ({"a": [1, {2, 3}]}, "data['a'][1] is a set"),
        ({"x": float("nan")}, "finite"),
        ({(1, 2): "tuple key"}, "keys must be strings"),
        (["not", "a", "mapping"], "must be a mapping"),
    ],
)
async def test_data_that_is_not_json_is_a_clear_type_error(
    audit: Audit, data: Any, words: str
) -> None:
    with pytest.raises(TypeError, match=words.replace("[", r"\[").replace("]", r"\]")):
        await audit.record("k", course_id=COURSE, data=data)
    assert await audit.search(course_id=COURSE) == []


async def test_ids_that_do_not_fit_are_refused(audit: Audit) -> None:
    with pytest.raises(ValueError, match="course_id"):
        await audit.record("k", course_id="c" * 65)
    with pytest.raises(ValueError, match="needs a kind"):
        await audit.record("")
    long_subject = await audit.record("k", subject="s" * 500)
    assert len(long_subject.subject) == 200
    odd = await audit.record("k", subject="nul\x00 and \udcff (a file name that is not UTF-8)")
    assert odd.subject == "nul\ufffd and \ufffd (a file name that is not UTF-8)"
    odd_data = await audit.record("k", data={"path": "\udcff\x00"})
    assert (await audit.search(course_id=None))[-1].data == odd_data.data == {"path": "\udcff\x00"}


# -- search and export -----------------------------------------------------------------------


async def seed_for_search(db: Database) -> tuple[Clock, list[AuditRecord]]:
    clock = Clock(1000.0)
    audit = Audit(db, clock=clock)
    records = []
    for i in range(30):
        clock.now = 1000.0 + i
        kind = ("instruction", "model.call", "tool.call")[i % 3]
        records.append(
            await audit.record(
                kind, actor_id=f"u_{i % 2}", course_id=COURSE, subject=f"s{i}", data={"i": i}
            )
        )
    await audit.record("login", actor_id="u_admin")
    await audit.aclose()
    return clock, records


async def test_search_filters_and_pages(db: Database, audit: Audit) -> None:
    _clock, records = await seed_for_search(db)

    assert await audit.search(course_id=COURSE, limit=1000) == records
    assert [r.kind for r in await audit.search(course_id=None)] == ["login"]
    assert await audit.search(course_id=COURSE, actor_id="u_1") == records[1::2]
    assert await audit.search(course_id=COURSE, kind="model.call") == records[1::3]
    assert await audit.search(course_id=COURSE, since=1010, until=1015) == records[10:15]
    assert await audit.search(course_id=COURSE, actor_id="u_0", kind="instruction", since=1005) == [
        r for r in records[6:] if r.actor_id == "u_0" and r.kind == "instruction"
    ]
    assert await audit.search(course_id="c_other") == []

    pages, after = [], None
    while page := await audit.search(course_id=COURSE, kind="tool.call", after_id=after, limit=3):
        pages.append(page)
        after = page[-1].id
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert [r for p in pages for r in p] == records[2::3]
    ids = [r.id for p in pages for r in p]
    assert ids == sorted(ids)

    for limit in (0, 1001):
        with pytest.raises(BadRequest, match="limit must be between 1 and 1000"):
            await audit.search(course_id=COURSE, limit=limit)


async def collect(chunks: Any) -> bytes:
    return b"".join([chunk async for chunk in chunks])


async def test_export_jsonl_and_csv_parse_back_to_the_records(db: Database, audit: Audit) -> None:
    _clock, records = await seed_for_search(db)
    formula = await audit.record(
        "instruction", course_id=COURSE, subject='=HYPERLINK("http://x")', data={"t": "é"}
    )
    records.append(formula)
    # more than one export page
    records += await record_many(audit, 520)
    records.sort(key=lambda r: r.id)

    jsonl = await collect(audit.export(course_id=COURSE))
    lines = jsonl.decode().splitlines()
    assert [json.loads(line) for line in lines] == [r.to_json() for r in records]

    text = (await collect(audit.export(course_id=COURSE, fmt="csv"))).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(records)
    for row, record in zip(rows, records, strict=True):
        subject = row["subject"].removeprefix("'") if record is formula else row["subject"]
        assert (
            int(row["id"]),
            row["chain"],
            int(row["seq"]),
            float(row["ts"]),
            row["actor_id"],
            row["kind"],
            subject,
            json.loads(row["data"]),
            row["prev_hash"],
            row["hash"],
        ) == (
            record.id,
            record.chain,
            record.seq,
            record.ts,
            record.actor_id,
            record.kind,
            record.subject,
            record.data,
            record.prev_hash,
            record.hash,
        )
    assert rows[records.index(formula)]["subject"] == '\'=HYPERLINK("http://x")'
    assert rows[0]["time"] == "1970-01-01T00:16:40.000+00:00"

    filtered = await collect(audit.export(course_id=COURSE, fmt="jsonl", actor_id="u_1"))
    assert [json.loads(line)["id"] for line in filtered.decode().splitlines()] == [
        r.id for r in records if r.actor_id == "u_1"
    ]
    header_only = await collect(audit.export(course_id="c_none", fmt="csv"))
    assert header_only.decode().splitlines() == [
        "id,chain,seq,ts,time,actor_id,kind,subject,data,prev_hash,hash"
    ]


def test_export_refuses_unknown_formats_and_filters_at_once(tmp_path: Path) -> None:
    audit = Audit(Database(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"))
    with pytest.raises(BadRequest, match="unknown export format 'xml': use jsonl or csv"):
        audit.export(course_id=COURSE, fmt="xml")
    with pytest.raises(BadRequest, match="unknown audit filter"):
        audit.export(course_id=COURSE, student="u_1")
