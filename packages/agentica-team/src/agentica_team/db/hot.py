"""``Hot``: a statement of every model call, run on the driver's cursor where that is safe.

SQLAlchemy's execution of a compiled, cached statement still costs 0.1-0.3 ms of CPU (execution
context, events, result wrapping), which was most of a model call's admission: on SQLite the
statement itself takes about 10 µs, on PostgreSQL one round trip. A ``Hot`` statement is
compiled once per driver and set of parameter names and runs on the connection's DBAPI cursor
(the stdlib ``sqlite3`` one on ``Database.run``'s thread; SQLAlchemy's asyncpg adapter, which
keeps its prepared statements and its transaction handling) with its parameters in the compiled
order, converted as the dialect converts them on the way in; its rows come back as named tuples
and its errors as SQLAlchemy's ``DBAPIError`` subclasses, as SQLAlchemy would raise them. A
statement that needs what only SQLAlchemy does at execution (Python-side column defaults, values
converted on the way out, parameters expanded at execution) runs through SQLAlchemy: the results
read the same way (``rowcount``, ``first()``, ``one()``, iteration; columns by attribute).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = ["Hot", "HotResult"]


class HotResult:
    """The rows (attribute access, tuple unpacking) and the rowcount of a ``Hot`` execution."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def first(self) -> Any:
        return self.rows[0] if self.rows else None

    def one_or_none(self) -> Any:
        if len(self.rows) > 1:
            raise sa.exc.MultipleResultsFound("more than one row where at most one was expected")
        return self.first()

    def one(self) -> Any:
        if len(self.rows) != 1:
            raise sa.exc.NoResultFound(f"{len(self.rows)} rows where exactly one was expected")
        return self.rows[0]


@dataclass(frozen=True, slots=True)
class _Raw:
    """A statement compiled for the raw cursor: its SQL, its parameter names in order, the
    values of the parameters it binds itself, the dialect's conversions of parameters on the
    way in (by position), and the row type of what it returns."""

    sql: str
    names: tuple[str, ...]
    defaults: dict[str, Any]
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]
    row: Any

    def parameters(self, given: Mapping[str, Any]) -> list[Any]:
        values = {**self.defaults, **given}
        ordered = [values[name] for name in self.names]
        for index, process in self.processors:
            ordered[index] = process(ordered[index])
        return ordered


class Hot:
    """``statement`` (Core, with named bind parameters), executed as cheaply as the dialect
    allows (see the module docstring)."""

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._raw: dict[tuple[str, ...], _Raw | None] = {}  # by driver and parameter names

    def __repr__(self) -> str:
        return f"Hot({str(self.statement)[:60]!r})"

    def execute(
        self, conn: Connection, params: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> HotResult:
        """Run with ``params`` (a list: once per item, rows and counts added up; an INSERT of
        several rows on PostgreSQL goes in one statement, its RETURNING rows in any order)."""
        many = [params] if isinstance(params, Mapping) else list(params)
        if not many:
            return HotResult([], 0)
        dialect = conn.dialect
        if len(many) > 1 and dialect.name == "postgresql" and isinstance(self.statement, sa.Insert):
            # one round trip for the batch (SQLAlchemy's multi-row INSERT); RETURNING rows may
            # come in any order
            result = conn.execute(self.statement, many)
            return HotResult(list(result) if result.returns_rows else [], len(many))
        keys = tuple(sorted(many[0]))
        cache_key = (dialect.name, dialect.driver, *keys)
        if cache_key in self._raw:
            raw = self._raw[cache_key]
        else:
            raw = self._raw[cache_key] = _compile(self.statement, dialect, keys)
        if raw is None:
            return self._through_sqlalchemy(conn, params, many)
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        cursor = dbapi.cursor()
        item: Mapping[str, Any] = many[0]
        try:
            rows: list[Any] = []
            count = 0
            for item in many:
                cursor.execute(raw.sql, raw.parameters(item))
                if raw.row is not None:
                    rows.extend(raw.row._make(found) for found in cursor.fetchall())
                count += max(cursor.rowcount, 0)
            return HotResult(rows, count)
        except dialect.loaded_dbapi.Error as error:  # as SQLAlchemy would raise it
            raise sa.exc.DBAPIError.instance(
                raw.sql, item, error, dialect.loaded_dbapi.Error, hide_parameters=True,
                dialect=dialect,
            ) from error  # fmt: skip
        finally:
            cursor.close()

    def _through_sqlalchemy(
        self,
        conn: Connection,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        many: list[Mapping[str, Any]],
    ) -> HotResult:
        if len(many) > 1:  # row by row: RETURNING in order, and a rowcount on every driver
            results = [self._through_sqlalchemy(conn, item, [item]) for item in many]
            rows = [row for result in results for row in result.rows]
            return HotResult(rows, sum(result.rowcount for result in results))
        result = conn.execute(self.statement, params)
        rows = list(result) if result.returns_rows else []
        return HotResult(rows, max(result.rowcount, 0))


def _row_type(fields: list[str]) -> Any:
    """A named tuple type for rows with these columns."""
    make: Any = namedtuple
    return make("HotRow", fields, rename=True)


def _returns(statement: sa.Executable) -> bool:
    return bool(getattr(statement, "_returning", ())) or isinstance(statement, sa.Select)


def _compile(statement: Any, dialect: Any, keys: tuple[str, ...]) -> _Raw | None:
    """``statement`` for the raw cursor with parameters ``keys``, or ``None`` if executing it
    needs SQLAlchemy."""
    column_keys = list(keys) if isinstance(statement, sa.Insert) else None
    compiled: Any = statement.compile(dialect=dialect, column_keys=column_keys)
    sql = str(compiled)
    names = tuple(compiled.positiontup or ())
    if "POSTCOMPILE" in sql or compiled.insert_prefetch or compiled.update_prefetch:
        return None
    processing = {
        name: process
        for bind, name in compiled.bind_names.items()
        if (process := bind.type.bind_processor(dialect)) is not None
    }
    processors = tuple(
        (index, processing[name]) for index, name in enumerate(names) if name in processing
    )
    row_type: Any = None
    if _returns(statement):
        columns = list(statement.exported_columns)
        for column in columns:
            if column.type.result_processor(dialect, None) is not None:
                return None
        row_type = _row_type([column.key for column in columns])
    defaults = {
        name: bind.effective_value
        for bind, name in compiled.bind_names.items()
        if name not in keys and not bind.required
    }
    if any(name not in keys and name not in defaults for name in names):
        return None
    return _Raw(sql, names, defaults, processors, row_type)
