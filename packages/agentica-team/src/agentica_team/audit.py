"""The audit: an append-only, tamper-evident record of what happened in the service.

Each course's records (and the server-wide ones, chain ``""``) form a hash chain: a record's
``hash`` is the SHA-256 of the canonical JSON of its chain, seq, ts, actor, kind, subject, data
and the previous record's hash (64 zeros for the first). ``team_audit_heads`` keeps each chain's
last seq and hash, read and updated in the same transaction as the insert (locked on PostgreSQL),
so concurrent writers never fork a chain and a removed last record is noticed. ``verify`` streams
through a chain in pages and reports the first record that does not fit. Strings in ``data`` are
redacted and one record's data is capped at ``MAX_DATA_BYTES``. ``record`` hands records to a
writer task that commits whatever is queued in one transaction (group commit), with the
writes ``along`` it that must commit with it (a model call's settling); ``record_in`` writes
inside the caller's transaction, so an action and its record commit together.
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import hashlib
import io
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from agentica_team.db.engine import Database
from agentica_team.db.hot import Hot
from agentica_team.db.schema import audit as audit_table
from agentica_team.db.schema import audit_heads
from agentica_team.errors import BadRequest
from agentica_team.security import redact

__all__ = [
    "MAX_DATA_BYTES",
    "ZERO_HASH",
    "Audit",
    "AuditRecord",
    "ChainReport",
    "record_hash",
]

ZERO_HASH = "0" * 64
MAX_DATA_BYTES = 64 * 1024
MAX_SUBJECT = 200
MAX_ID = 64
MAX_DEPTH = 32
MAX_SEARCH = 1000
_CUT_LIMITS = (32768, 8192, 1024, 128)
_PREVIEW = 4096
_INLINE_WORK = 4000  # items, or 64-character pieces of strings, cleaned on the event loop
_MAX_BATCH = 64  # records per transaction: bounds the work of one event-loop step
_VERIFY_PAGE = 1000
_EXPORT_PAGE = 500
_FILTERS = frozenset({"actor_id", "kind", "since", "until", "after_id"})
_CSV_COLUMNS = (
    "id",
    "chain",
    "seq",
    "ts",
    "time",
    "actor_id",
    "kind",
    "subject",
    "data",
    "prev_hash",
    "hash",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_HEAD_RESTORED = "audit.head_restored"

Along = Callable[[Connection], Any]
"""A write that commits in the same transaction as a record, before it (synchronous: it runs
inside ``Database.run``)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def record_hash(
    chain: str,
    seq: int,
    ts: float,
    actor_id: str,
    kind: str,
    subject: str,
    data_json: str,
    prev_hash: str,
) -> str:
    """The SHA-256 (hex) of a record: of the canonical JSON object (sorted keys, no spaces,
    ASCII) of these fields, where ``data_json`` is the canonical JSON of ``data`` as stored.

    Written out instead of ``json.dumps`` of the whole object so verification needs no parsing
    of ``data``; the result is byte-identical (tested)."""
    s = _json_string
    text = (
        f'{{"actor_id":{s(actor_id)},"chain":{s(chain)},"data":{data_json},"kind":{s(kind)},'
        f'"prev_hash":{s(prev_hash)},"seq":{int(seq)},"subject":{s(subject)},"ts":{float(ts)!r}}}'
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _json_string(value: str) -> str:
    """``json.dumps(value)`` (ASCII), 5x faster for a string; another type (a value altered
    in the database) is encoded as what it is."""
    return _encode_string(value) if type(value) is str else json.dumps(value)


_encode_string = json.encoder.encode_basestring_ascii


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One stored audit record (``data`` redacted and capped as stored)."""

    id: int
    chain: str
    seq: int
    ts: float
    actor_id: str
    kind: str
    subject: str
    data: dict[str, Any]
    prev_hash: str
    hash: str

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (its fields by name)."""
        return {
            "id": self.id,
            "chain": self.chain,
            "seq": self.seq,
            "ts": self.ts,
            "actor_id": self.actor_id,
            "kind": self.kind,
            "subject": self.subject,
            "data": self.data,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What ``verify`` found in one chain: ``records`` checked, and the first problem.

    ``head_hash`` is the chain's last hash: write it down somewhere else (a printout, an e-mail)
    and a later rewrite of the whole chain by someone with write access to the database shows."""

    chain: str
    records: int
    ok: bool
    problem: str | None
    first_bad_seq: int | None
    head_hash: str = ZERO_HASH

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object."""
        return {
            "chain": self.chain,
            "records": self.records,
            "ok": self.ok,
            "problem": self.problem,
            "first_bad_seq": self.first_bad_seq,
            "head_hash": self.head_hash,
        }


# -- preparing data --------------------------------------------------------------------------


class _NotJSON(TypeError):
    """A value in the data that JSON cannot hold; ``where`` is filled in on the way out."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.where: list[str] = []

    def __str__(self) -> str:
        return f"audit data{''.join(reversed(self.where))} {self.what}"


class _TooMuchWork(Exception):
    """The data is large enough that cleaning it belongs in a worker thread."""


@dataclass(slots=True)
class _Walk:
    """What ``_clean`` saw: each string's length, and how much work that was."""

    lengths: list[int] = field(default_factory=list)
    work: int = 0
    budget: int | None = None  # raise _TooMuchWork past this much work


def _clean(value: Any, depth: int, walk: _Walk) -> Any:
    """``value`` as plain JSON values with every string redacted. Raises ``_NotJSON``."""
    walk.work += 1
    if walk.budget is not None and walk.work > walk.budget:
        raise _TooMuchWork
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        walk.lengths.append(len(value))
        kept = value[: MAX_DATA_BYTES + 256]
        walk.work += len(kept) // 64
        return redact(kept)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJSON(f"is {value!r}: only finite numbers can be stored")
        return float(value)
    if depth >= MAX_DEPTH:
        return f"[cut: nested deeper than {MAX_DEPTH} levels]"
    if isinstance(value, Mapping):
        return _clean_items(value.items(), depth, walk, {})
    if isinstance(value, (list, tuple)):
        return _clean_items(enumerate(value), depth, walk, None)
    raise _NotJSON(
        f"is a {type(value).__name__}, which is not JSON-serialisable: "
        "pass str, int, float, bool, None, and lists and dicts of them"
    )


def _clean_items(items: Any, depth: int, walk: _Walk, mapping: dict[str, Any] | None) -> Any:
    listed: list[Any] = []
    for key, item in items:
        try:
            if mapping is None:
                listed.append(_clean(item, depth + 1, walk))
            else:
                mapping[_key(key)] = _clean(item, depth + 1, walk)
        except _NotJSON as exc:
            exc.where.append(f"[{key!r}]")
            raise
    return listed if mapping is None else mapping


def _key(key: Any) -> str:
    if isinstance(key, str):
        return redact(key[:MAX_SUBJECT])
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    raise _NotJSON(f"has the key {key!r}: keys must be strings")


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]} [cut: {len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    return value


async def prepare_data(data: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """``data`` redacted and cut to fit ``MAX_DATA_BYTES``, and its canonical JSON. Raises
    ``TypeError`` (saying where) for data JSON cannot hold. Large data (many items, long
    strings) is cleaned in a worker thread, so the event loop is not held up."""
    try:
        return _prepare(data, _Walk(budget=_INLINE_WORK))
    except _TooMuchWork:
        return await asyncio.to_thread(_prepare, data, _Walk())


def _prepare(data: Mapping[str, Any] | None, walk: _Walk) -> tuple[dict[str, Any], str]:
    if data is None:
        return {}, "{}"
    if not isinstance(data, Mapping):
        raise TypeError(f"audit data must be a mapping, not a {type(data).__name__}")
    clean: dict[str, Any] = _clean(data, 0, walk)
    text = _dumps(clean)
    if len(text) <= MAX_DATA_BYTES:
        return clean, text
    for limit in _CUT_LIMITS:
        saved = sum(length - limit for length in walk.lengths if length > limit)
        if len(text) - saved > MAX_DATA_BYTES:
            continue  # cutting strings this far cannot be enough: do not try
        cut: dict[str, Any] = _cut(clean, limit)
        cut_text = _dumps(cut)
        if len(cut_text) <= MAX_DATA_BYTES:
            return cut, cut_text
    preview = {
        "cut": f"the data ({len(text)} bytes of JSON) was too large for the audit even with "
        f"long strings cut; its first {_PREVIEW} characters are kept",
        "preview": _cut(text, _PREVIEW),
    }
    return preview, _dumps(preview)


def _short(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _plain_text(value: str) -> str:
    """``value`` as text every database stores: no NUL, no lone surrogate (a file name that
    was not UTF-8), each replaced by U+FFFD."""
    value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    return value


def _check_id(name: str, value: str) -> None:
    if not isinstance(value, str) or len(value) > MAX_ID:
        raise ValueError(f"audit {name} must be a string of at most {MAX_ID} characters")


@dataclass(slots=True)
class _Pending:
    """A record waiting for its seq and hash."""

    chain: str
    ts: float
    actor_id: str
    kind: str
    subject: str
    data: dict[str, Any]
    data_json: str
    future: asyncio.Future[AuditRecord] | None = field(default=None, compare=False)
    along: Along | None = field(default=None, compare=False)


# -- the audit -------------------------------------------------------------------------------


class Audit:
    """Writes, verifies, searches and exports the audit in ``db``.

    ``record`` returns once the record is committed. Inside a ``db.write()`` transaction use
    ``record_in`` instead (``record`` would wait for the writer, which waits for that
    transaction). Close with ``aclose`` (it writes what is queued first)."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock
        self._queue: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False

    # -- writing -----------------------------------------------------------------------------

    async def _pending(
        self, kind: str, actor_id: str, course_id: str, subject: str, data: Any
    ) -> _Pending:
        if not kind:
            raise ValueError("an audit record needs a kind")
        _check_id("kind", kind)
        _check_id("actor_id", actor_id)
        _check_id("course_id", course_id)
        clean, text = await prepare_data(data)
        return _Pending(
            chain=course_id,
            ts=float(self._clock()),
            actor_id=actor_id,
            kind=kind,
            subject=_short(_plain_text(redact(subject)), MAX_SUBJECT),
            data=clean,
            data_json=text,
        )

    async def record(
        self,
        kind: str,
        *,
        actor_id: str = "",
        course_id: str = "",
        subject: str = "",
        data: Mapping[str, Any] | None = None,
        along: Along | None = None,
    ) -> AuditRecord:
        """Append a record to ``course_id``'s chain (``""``: server-wide); returns once it is
        committed. ``along(conn)`` runs in the same transaction just before (a failure there
        fails the record; it may run again if the group's transaction is retried). Raises
        ``TypeError`` for data that is not JSON."""
        item = await self._pending(kind, actor_id, course_id, subject, data)
        item.along = along
        if self._closed:
            raise RuntimeError("the audit is closed")
        future: asyncio.Future[AuditRecord] = asyncio.get_running_loop().create_future()
        item.future = future
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name="agentica-team audit")
        self._queue.put_nowait(item)
        return await future  # cancelling the wait does not take the record back

    async def record_in(
        self,
        conn: AsyncConnection,
        kind: str,
        *,
        actor_id: str = "",
        course_id: str = "",
        subject: str = "",
        data: Mapping[str, Any] | None = None,
    ) -> AuditRecord:
        """Append a record inside the caller's write transaction ``conn`` (from
        ``Database.write()``): it commits, or not, with the caller's other changes."""
        write = await self.prepare(
            kind, actor_id=actor_id, course_id=course_id, subject=subject, data=data
        )
        return await conn.run_sync(write)

    async def prepare(
        self,
        kind: str,
        *,
        actor_id: str = "",
        course_id: str = "",
        subject: str = "",
        data: Mapping[str, Any] | None = None,
    ) -> Callable[[Connection], AuditRecord]:
        """A record made ready now (its data cleaned and checked: ``TypeError`` here) and the
        synchronous write that appends it inside a ``Database.run`` transaction, such as a
        ``Budgets.reserve`` ``along``."""
        item = await self._pending(kind, actor_id, course_id, subject, data)

        def write(conn: Connection) -> AuditRecord:
            (stored,) = _append(conn, [item])
            return stored

        return write

    async def records_in(
        self, conn: AsyncConnection, records: Sequence[Mapping[str, Any]]
    ) -> list[AuditRecord]:
        """Several ``record_in``s at once (each a mapping of its keyword arguments: ``kind``,
        ``actor_id``, ``course_id``, ``subject``, ``data``): one head lock and one INSERT per
        chain instead of one each."""
        items = [
            await self._pending(
                r["kind"],
                r.get("actor_id", ""),
                r.get("course_id", ""),
                r.get("subject", ""),
                r.get("data"),
            )
            for r in records
        ]
        return await conn.run_sync(_append, items) if items else []

    async def aclose(self) -> None:
        """Write what is queued, then stop the writer task."""
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done():
            self._queue.put_nowait(None)
            await writer

    async def _write_loop(self) -> None:
        """Commit what is queued, batch by batch, until the ``None`` that ``aclose`` puts."""
        batch: list[_Pending] = []
        try:
            while True:
                batch = []
                item = await self._queue.get()
                while item is not None:
                    batch.append(item)
                    if len(batch) >= _MAX_BATCH or self._queue.empty():
                        break
                    item = self._queue.get_nowait()
                if batch:
                    await self._commit(batch)
                if item is None:
                    return
        finally:  # also when cancelled: nobody waits forever for a record never written
            stopped = RuntimeError("the audit writer stopped before the record was committed")
            while not self._queue.empty():
                queued = self._queue.get_nowait()
                if queued is not None:
                    batch.append(queued)
            for pending in batch:
                _settle(pending, stopped)

    async def _commit(self, batch: list[_Pending]) -> None:
        """Write ``batch`` in one transaction; if that fails, each record on its own, so one
        bad record does not fail the others."""
        try:
            stored = await self._db.run(lambda conn: _append(conn, batch))
        except Exception as exc:
            if len(batch) > 1:
                for item in batch:
                    await self._commit([item])
                return
            _settle(batch[0], exc)
            return
        for item, result in zip(batch, stored, strict=True):
            _settle(item, result)
        await asyncio.sleep(0)  # let the callers run before the next batch is prepared

    # -- verifying ---------------------------------------------------------------------------

    async def verify(self, course_id: str | None = None) -> list[ChainReport]:
        """Check ``course_id``'s chain (``""``: server-wide; ``None``: every chain)."""
        if course_id is not None:
            return [await self._verify_chain(course_id)]
        async with self._db.read() as conn:
            heads = (await conn.execute(sa.select(audit_heads.c.chain))).scalars().all()
            stored = (await conn.execute(sa.select(audit_table.c.chain).distinct())).scalars().all()
        return [await self._verify_chain(chain) for chain in sorted({*heads, *stored})]

    async def _verify_chain(self, chain: str) -> ChainReport:
        """Check the chain as far as its head in one snapshot (later appends are left for the
        next verification), page by page, each page in its own short read transaction."""
        check = _ChainCheck(chain)
        head_seq, head_hash, max_seq = await self._head(chain)
        end = head_seq if head_seq is not None else max_seq or 0
        while check.problem is None and check.seq < end:
            page = await self._page(chain, check.seq, end)
            check.feed(page)
            if not page:
                break
        if check.problem is None:
            check.finish(head_seq, head_hash, max_seq)
        return check.report()

    async def _head(self, chain: str) -> tuple[int | None, str, int | None]:
        """The chain's head (seq, hash) and its highest stored seq, from one snapshot."""
        head = audit_heads.c
        statement = sa.select(
            sa.select(head.seq).where(head.chain == chain).scalar_subquery(),
            sa.select(head.hash).where(head.chain == chain).scalar_subquery(),
            sa.select(sa.func.max(audit_table.c.seq))
            .where(audit_table.c.chain == chain)
            .scalar_subquery(),
        )
        async with self._db.read() as conn:
            row = (await conn.execute(statement)).one()
        return row[0], row[1] or ZERO_HASH, row[2]

    async def _page(self, chain: str, after: int, upto: int) -> Sequence[Any]:
        c = audit_table.c
        statement = (
            sa.select(c.id, c.seq, c.ts, c.actor_id, c.kind, c.subject, c.data, c.prev_hash, c.hash)
            .where(c.chain == chain, c.seq > after, c.seq <= upto)
            .order_by(c.seq)
            .limit(_VERIFY_PAGE)
        )
        async with self._db.read() as conn:
            return (await conn.execute(statement)).all()

    # -- reading -----------------------------------------------------------------------------

    async def search(
        self,
        *,
        course_id: str | None,
        actor_id: str | None = None,
        kind: str | None = None,
        since: float | None = None,
        until: float | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Records of ``course_id``'s chain (``None``: the server-wide chain), ordered by id,
        by ``actor_id``, ``kind``, time (``since`` <= ts < ``until``), after ``after_id``."""
        if not 1 <= limit <= MAX_SEARCH:
            raise BadRequest(f"limit must be between 1 and {MAX_SEARCH}, not {limit}")
        c = audit_table.c
        chain = course_id or ""
        statement = sa.select(audit_table).where(c.chain == chain)
        if actor_id is not None:
            statement = statement.where(c.actor_id == actor_id)
        if kind is not None:
            statement = statement.where(c.kind == kind)
        if since is not None:
            statement = statement.where(c.ts >= since)
        if until is not None:
            statement = statement.where(c.ts < until)
        if after_id is not None:
            # ids grow with seq within a chain (verify checks it): seek by seq on the index
            after_seq = sa.select(c.seq).where(c.id == after_id, c.chain == chain)
            statement = statement.where(
                c.id > after_id, c.seq > sa.func.coalesce(after_seq.scalar_subquery(), 0)
            )
        statement = statement.order_by(c.seq, c.id).limit(limit)
        async with self._db.read() as conn:
            rows = (await conn.execute(statement)).all()
        return [_from_row(row) for row in rows]

    def export(
        self, *, course_id: str | None, fmt: str = "jsonl", **filters: Any
    ) -> AsyncIterator[bytes]:
        """The records ``search`` would find (all of them, page by page) as JSON lines or CSV
        (with a header row). Raises ``BadRequest`` at once for an unknown format or filter.

        In CSV, a cell that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``)
        gets a leading ``'``; the JSON lines are the exact records."""
        if fmt not in ("jsonl", "csv"):
            raise BadRequest(f"unknown export format {fmt!r}: use jsonl or csv")
        unknown = set(filters) - _FILTERS
        if unknown:
            raise BadRequest(
                f"unknown audit filter(s) {', '.join(sorted(unknown))}: "
                f"use {', '.join(sorted(_FILTERS))}"
            )
        return self._export(course_id, fmt, filters)

    async def _export(
        self, course_id: str | None, fmt: str, filters: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        after_id = filters.pop("after_id", None)
        if fmt == "csv":
            yield _csv_lines([_CSV_COLUMNS])
        while True:
            page = await self.search(
                course_id=course_id, after_id=after_id, limit=_EXPORT_PAGE, **filters
            )
            if not page:
                return
            if fmt == "csv":
                yield _csv_lines([_csv_row(record) for record in page])
            else:
                yield "".join(_dumps(record.to_json()) + "\n" for record in page).encode()
            after_id = page[-1].id


# -- writing, inside a transaction -----------------------------------------------------------


def _settle(item: _Pending, outcome: AuditRecord | BaseException) -> None:
    future = item.future
    if future is None or future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


# the statements of every append, built once (no construction or cache-key walk per record)
_HEAD = Hot(
    sa.select(audit_heads.c.seq, audit_heads.c.hash)
    .where(audit_heads.c.chain == sa.bindparam("b_chain"))
    .with_for_update()
)
_SET_HEAD = Hot(
    sa.update(audit_heads)
    .where(audit_heads.c.chain == sa.bindparam("b_chain"))
    .values(seq=sa.bindparam("b_seq"), hash=sa.bindparam("b_hash"))
)
_INSERT = Hot(sa.insert(audit_table).returning(audit_table.c.id, audit_table.c.seq))


def _append(conn: Connection, items: list[_Pending]) -> list[AuditRecord]:
    """Append ``items`` to their chains (heads locked in chain order); the stored records, in
    the order of ``items``."""
    by_chain: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_chain.setdefault(item.chain, []).append(index)
    stored: dict[int, AuditRecord] = {}
    for item in items:
        if item.along is not None:
            item.along(conn)
    for chain in sorted(by_chain):
        chain_items = [items[i] for i in by_chain[chain]]
        seq, prev, restored = _lock_head(conn, chain, chain_items[0].ts)
        if restored is not None:
            chain_items.insert(0, restored)
        records = _insert(conn, chain, seq, prev, chain_items)
        last = records[-1]
        _SET_HEAD.execute(conn, {"b_chain": chain, "b_seq": last.seq, "b_hash": last.hash})
        indices = by_chain[chain]
        stored.update(zip(indices, records[-len(indices) :], strict=True))
    return [stored[i] for i in range(len(items))]


def _lock_head(conn: Connection, chain: str, ts: float) -> tuple[int, str, _Pending | None]:
    """The chain's head (seq, hash), locked until the transaction ends (SQLite: its writes
    are serialized anyway). A missing head is created; if the chain has records without one
    (someone deleted it), the head is rebuilt from the last record and a record saying so is
    put first."""
    row = _HEAD.execute(conn, {"b_chain": chain}).one_or_none()
    if row is not None:
        return int(row.seq), str(row.hash), None
    c = audit_table.c
    last = conn.execute(
        sa.select(c.seq, c.hash).where(c.chain == chain).order_by(c.seq.desc()).limit(1)
    ).one_or_none()
    seq, prev = (int(last.seq), str(last.hash)) if last is not None else (0, ZERO_HASH)
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    insert = dialect_insert(audit_heads).values(chain=chain, seq=seq, hash=prev)
    created = conn.execute(insert.on_conflict_do_nothing(index_elements=["chain"]))
    row = _HEAD.execute(conn, {"b_chain": chain}).one()
    restored = None
    if last is not None and created.rowcount == 1:
        data, text = _prepare({"reason": "the chain's head row was missing", "seq": seq}, _Walk())
        restored = _Pending(chain, ts, "", _HEAD_RESTORED, chain, data, text)
    return int(row.seq), str(row.hash), restored


def _insert(
    conn: Connection, chain: str, seq: int, prev: str, items: list[_Pending]
) -> list[AuditRecord]:
    rows: list[dict[str, Any]] = []
    for item in items:
        seq += 1
        digest = record_hash(
            chain, seq, item.ts, item.actor_id, item.kind, item.subject, item.data_json, prev
        )
        rows.append(
            {
                "chain": chain,
                "seq": seq,
                "ts": item.ts,
                "actor_id": item.actor_id,
                "kind": item.kind,
                "subject": item.subject,
                "data": item.data_json,
                "prev_hash": prev,
                "hash": digest,
            }
        )
        prev = digest
    # ``Hot``: row by row on SQLite's cursor, one multi-row INSERT on PostgreSQL, whose
    # RETURNING order is not guaranteed: ids are matched by seq
    inserted = _INSERT.execute(conn, rows)
    ids = {int(row_seq): int(row_id) for row_id, row_seq in inserted}
    return [
        AuditRecord(
            id=ids[row["seq"]],
            chain=chain,
            seq=row["seq"],
            ts=item.ts,
            actor_id=item.actor_id,
            kind=item.kind,
            subject=item.subject,
            data=item.data,
            prev_hash=row["prev_hash"],
            hash=row["hash"],
        )
        for row, item in zip(rows, items, strict=True)
    ]


# -- verifying -------------------------------------------------------------------------------


class _ChainCheck:
    """The state of one chain's verification, fed page by page."""

    def __init__(self, chain: str) -> None:
        self.chain = chain
        self.seq = 0
        self.hash = ZERO_HASH
        self.id: int | None = None
        self.records = 0
        self.problem: str | None = None
        self.bad: int | None = None

    def fail(self, seq: int, problem: str) -> ChainReport:
        self.problem, self.bad = problem, seq
        return self.report()

    def report(self) -> ChainReport:
        return ChainReport(
            chain=self.chain,
            records=self.records,
            ok=self.problem is None,
            problem=self.problem,
            first_bad_seq=self.bad,
            head_hash=self.hash,
        )

    def feed(self, rows: Sequence[Any]) -> None:
        """Check ``rows`` (id, seq, ts, actor_id, kind, subject, data, prev_hash, hash) in seq
        order, up to the first problem."""
        for row in rows:
            problem = self._problem(*row)
            if problem is not None:
                self.fail(self.seq + 1, problem)
                return
            self.seq, self.hash, self.id = row[1], row[8], row[0]
            self.records += 1

    def _problem(
        self, id: Any, seq: Any, ts: Any, actor: Any, kind: Any, subject: Any, *rest: Any
    ) -> str | None:
        data, prev_hash, stored_hash = rest
        if seq != self.seq + 1:
            return f"record seq {self.seq + 1} is missing (the next stored record is seq {seq})"
        try:
            digest = record_hash(self.chain, seq, ts, actor, kind, subject, data, prev_hash)
        except (TypeError, ValueError):
            digest = None
        if digest != stored_hash:
            return f"record seq {seq} was altered: its fields do not match its hash"
        if prev_hash != self.hash:
            return (
                f"record seq {seq} does not follow record seq {self.seq}: its prev_hash is "
                "not that record's hash (one of them was altered, or replaced)"
            )
        if self.id is not None and id <= self.id:
            return (
                f"record seq {seq} is out of order: its id {id} is not after the "
                f"id {self.id} of record seq {self.seq} (records were swapped)"
            )
        return None

    def finish(self, head_seq: int | None, head_hash: str, max_seq: int | None) -> None:
        """Compare the end of the chain with its head row."""
        if head_seq is None:
            if max_seq is not None:
                self.fail(
                    self.seq,
                    "the chain's head row is missing (deleted?), so whether records were "
                    f"removed from its end cannot be checked (last record: seq {self.seq})",
                )
        elif self.seq < head_seq:
            self.fail(
                self.seq + 1,
                f"record seq {self.seq + 1} is missing: the chain ends at seq {self.seq} but "
                f"its head says {head_seq} (the last records were removed)",
            )
        elif self.hash != head_hash:
            self.fail(
                self.seq,
                f"record seq {self.seq} does not match the chain's head: it was altered "
                "or replaced (or the head was)",
            )
        elif max_seq is not None and max_seq > head_seq:
            self.fail(
                head_seq + 1,
                f"records after the head (seq {head_seq + 1} to {max_seq}) were added "
                "behind the audit's back",
            )


# -- rows and exports ------------------------------------------------------------------------


def _from_row(row: sa.Row[Any]) -> AuditRecord:
    """The record in ``row``; values altered into something unreadable (SQLite stores any
    type in any column) are shown as ``unreadable`` / 0, never an error: ``verify`` reports
    them."""
    try:
        data = json.loads(row.data, parse_constant=_no_constant)
    except (TypeError, ValueError):
        data = None
    if not isinstance(data, dict):
        data = {"unreadable": _short(str(row.data), 1000)}
    return AuditRecord(
        id=int(row.id),
        chain=str(row.chain),
        seq=int(_number(row.seq)),
        ts=_number(row.ts),
        actor_id=str(row.actor_id),
        kind=str(row.kind),
        subject=str(row.subject),
        data=data,
        prev_hash=str(row.prev_hash),
        hash=str(row.hash),
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _csv_row(record: AuditRecord) -> list[Any]:
    try:
        when = dt.datetime.fromtimestamp(record.ts, dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):  # a time altered beyond the calendar
        when = ""
    cells: list[Any] = [
        record.id,
        record.chain,
        record.seq,
        repr(record.ts),
        when,
        record.actor_id,
        record.kind,
        record.subject,
        _dumps(record.data),
        record.prev_hash,
        record.hash,
    ]
    return [
        "'" + cell if isinstance(cell, str) and cell.startswith(_FORMULA_START) else cell
        for cell in cells
    ]


def _csv_lines(rows: list[Sequence[Any]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")
