"""Accounts, courses and credentials: the service's who-is-who.

``Accounts`` creates users (admin, teacher, student), courses and their members, provisions a
class from a CSV or a list of e-mails, issues and revokes personal API tokens (stored hashed,
expiring), logs browsers in with a password (argon2, rate-limited per account and per address)
and resolves a request's credentials to a ``Principal``. Every change is audited in the same
transaction as the change itself.

A token's principal and a caller's courses are kept for ``cache_ttl`` seconds (``_Recent``):
a change made through this ``Accounts`` (revoke, re-issue, deactivate, membership, course) drops
them at once, a change made by another process (a second worker, the command line) is seen
within ``cache_ttl`` (default ``CACHE_TTL``, 5 s; 0 turns the cache off).
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentica_team.db import Database
from agentica_team.db.schema import courses, login_failures, members, new_id, tokens, users
from agentica_team.db.schema import web_sessions as web_sessions_table
from agentica_team.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    Unauthorized,
)
from agentica_team.principal import ROLES, Principal, Role
from agentica_team.security import (
    TOKEN_PREFIX,
    KeyBox,
    hash_password,
    hash_secret,
    new_secret,
    new_token,
    verify_password,
)

if TYPE_CHECKING:
    from agentica_team.audit import Audit

__all__ = [
    "Accounts",
    "Course",
    "IssuedToken",
    "Member",
    "ProvisionedStudent",
    "TokenInfo",
    "User",
    "WebLogin",
    "parse_roster",
]

_EMAIL = re.compile(r"^[^@\s,;<>\"']{1,64}@[A-Za-z0-9.-]{1,253}$")
_COURSE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_ROSTER = 2000
_TOUCH_EVERY = 60.0
CACHE_TTL = 5.0
"""Seconds a token's principal and a caller's courses are reused (see the module docstring)."""
_CACHE_MAX = 10_000
_ALL_COURSES = sa.select(courses).order_by(courses.c.created_at)
_MY_COURSES = _ALL_COURSES.join(members, members.c.course_id == courses.c.id).where(
    members.c.user_id == sa.bindparam("user_id")
)
_TOKEN_QUERY = (
    sa.select(tokens, users.c.email, users.c.name.label("user_name"), users.c.role, users.c.active)
    .join(users, users.c.id == tokens.c.user_id)
    .where(tokens.c.hash == sa.bindparam("digest"))
)


@dataclass(frozen=True, slots=True)
class User:
    id: str
    email: str
    name: str
    role: Role
    active: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class Course:
    id: str
    name: str
    title: str
    owner_id: str
    model: str | None
    model_base_url: str | None
    model_api_key_set: bool
    max_output_tokens: int | None
    created_at: float
    runtime: str = ""
    """The runtime of the course's new sessions (``""``: the server's ``agent_runtime``)."""


@dataclass(frozen=True, slots=True)
class Member:
    user: User
    role: str
    added_at: float


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: str
    user_id: str
    name: str
    hint: str
    created_at: float
    expires_at: float
    revoked_at: float | None
    last_used_at: float | None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token as issued: ``token`` is shown this once and never stored."""

    info: TokenInfo
    token: str


@dataclass(frozen=True, slots=True)
class ProvisionedStudent:
    """One roster line's outcome: ``token``/``connect`` are ``None`` when the student already
    held a live token for the course (it is not replaced)."""

    user: User
    created: bool
    token: str | None
    connect: str | None


@dataclass(frozen=True, slots=True)
class WebLogin:
    principal: Principal
    cookie: str
    expires_at: float


def _user(row: Any) -> User:
    return User(row.id, row.email, row.name, row.role, bool(row.active), row.created_at)


def _course(row: Any) -> Course:
    return Course(
        id=row.id,
        name=row.name,
        title=row.title,
        owner_id=row.owner_id,
        model=row.model,
        model_base_url=row.model_base_url,
        model_api_key_set=bool(row.model_api_key),
        max_output_tokens=row.max_output_tokens,
        created_at=row.created_at,
        runtime=row.runtime,
    )


def _token(row: Any) -> TokenInfo:
    return TokenInfo(
        row.id,
        row.user_id,
        row.name,
        row.hint,
        row.created_at,
        row.expires_at,
        row.revoked_at,
        row.last_used_at,
    )


def check_email(email: str) -> str:
    """``email`` normalised (trimmed, lower case), or ``BadRequest`` saying what is wrong."""
    value = email.strip().lower()
    if not _EMAIL.match(value):
        raise BadRequest(f"{email[:100]!r} is not an e-mail address (expected name@domain)")
    return value


def parse_roster(text: str) -> list[tuple[str, str]]:
    """``(email, name)`` pairs from a CSV (columns ``email`` and optionally ``name``, with or
    without a header row) or from e-mails separated by newlines, commas or semicolons."""
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if rows and rows[0] and rows[0][0].strip().lower() in ("email", "e-mail", "mail"):
        rows = rows[1:]
    if rows and all(len(row) == 1 for row in rows):
        cells = [c for row in rows for c in re.split(r"[;\s]+", row[0]) if c]
        rows = [[c] for c in cells]
    pairs: dict[str, str] = {}
    for number, row in enumerate(rows, 1):
        try:
            email = check_email(row[0])
        except BadRequest as exc:
            raise BadRequest(f"roster line {number}: {exc.message}") from None
        name = row[1].strip()[:200] if len(row) > 1 and row[1].strip() else email.split("@")[0]
        pairs[email] = name
    if not pairs:
        raise BadRequest("the roster is empty: give a CSV with an `email` column or e-mails")
    if len(pairs) > MAX_ROSTER:
        raise BadRequest(f"the roster has {len(pairs)} students; add at most {MAX_ROSTER} at once")
    return list(pairs.items())


@dataclass(frozen=True, slots=True)
class _TokenHit:
    principal: Principal
    expires_at: float  # the token's own expiry (``clock`` time)


class _Recent:
    """Recently resolved tokens (by their hash) and callers' courses, each kept ``ttl``
    seconds (monotonic); ``forget_*`` drops what a change in this process made stale."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.tokens: dict[str, tuple[float, _TokenHit]] = {}
        self.courses: dict[tuple[str, bool], tuple[float, list[Course]]] = {}
        self.generation = 0  # bumped by every forget: a read begun before it is not kept

    def token(self, digest: str) -> _TokenHit | None:
        found = self.tokens.get(digest)
        if found is None or time.monotonic() >= found[0]:
            return None
        return found[1]

    def keep_token(self, digest: str, hit: _TokenHit, generation: int) -> None:
        if self.ttl > 0 and generation == self.generation:
            _bounded(self.tokens)[digest] = (time.monotonic() + self.ttl, hit)

    def courses_of(self, key: tuple[str, bool]) -> list[Course] | None:
        found = self.courses.get(key)
        if found is None or time.monotonic() >= found[0]:
            return None
        return list(found[1])

    def keep_courses(self, key: tuple[str, bool], found: list[Course], generation: int) -> None:
        if self.ttl > 0 and generation == self.generation:
            _bounded(self.courses)[key] = (time.monotonic() + self.ttl, list(found))

    def forget_user(self, user_id: str) -> None:
        """Drop ``user_id``'s tokens (revoked, re-issued, deactivated)."""
        self.generation += 1
        stale = [k for k, (_, hit) in self.tokens.items() if hit.principal.user_id == user_id]
        for key in stale:
            del self.tokens[key]

    def forget_courses(self) -> None:
        """Drop every caller's courses (a course or a membership changed)."""
        self.generation += 1
        self.courses.clear()


def _bounded(cache: dict[Any, tuple[float, Any]]) -> dict[Any, tuple[float, Any]]:
    """``cache`` with its expired entries dropped once it holds ``_CACHE_MAX``."""
    if len(cache) >= _CACHE_MAX:
        now = time.monotonic()
        for key in [k for k, (until, _) in cache.items() if until <= now]:
            del cache[key]
        if len(cache) >= _CACHE_MAX:
            cache.clear()
    return cache


class Accounts:
    """Users, courses, members and credentials in ``db``, audited to ``audit``."""

    def __init__(
        self,
        db: Database,
        audit: Audit,
        *,
        token_ttl: float = 180 * 86400,
        web_session_ttl: float = 12 * 3600,
        login_limit: int = 10,
        base_url: str = "http://127.0.0.1:8000",
        keys: KeyBox | None = None,
        clock: Callable[[], float] = time.time,
        cache_ttl: float = CACHE_TTL,
    ) -> None:
        self.db = db
        self._recent = _Recent(cache_ttl)
        self.keys = keys
        self.audit = audit
        self.token_ttl = token_ttl
        self.web_session_ttl = web_session_ttl
        self.login_limit = login_limit
        self.base_url = base_url
        self.clock = clock

    # -- users ----------------------------------------------------------------------------------

    async def create_user(
        self,
        email: str,
        *,
        name: str = "",
        role: str = "student",
        password: str | None = None,
        actor: str = "",
    ) -> User:
        """A new account; ``Conflict`` if the e-mail is taken."""
        if role not in ROLES:
            raise BadRequest(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        address = check_email(email)
        hashed = await asyncio.to_thread(hash_password, password) if password else None
        async with self.db.write() as conn:
            return await self._insert_user(conn, address, name, role, hashed, actor)

    async def _insert_user(
        self,
        conn: AsyncConnection,
        email: str,
        name: str,
        role: str,
        hashed: str | None,
        actor: str,
    ) -> User:
        taken = await conn.scalar(sa.select(users.c.id).where(users.c.email == email))
        if taken is not None:
            raise Conflict(f"an account with e-mail {email!r} exists already")
        row = {
            "id": new_id("u"),
            "email": email,
            "name": (name or email.split("@")[0])[:200],
            "role": role,
            "password_hash": hashed,
            "active": True,
            "created_at": self.clock(),
        }
        await conn.execute(users.insert().values(**row))
        await self.audit.record_in(
            conn,
            "user_created",
            actor_id=actor,
            subject=str(row["id"]),
            data={"email": email, "role": role},
        )
        return _user(_Obj(row))

    async def get_user(self, user_id: str) -> User:
        async with self.db.read() as conn:
            row = (await conn.execute(sa.select(users).where(users.c.id == user_id))).first()
        if row is None:
            raise NotFound(f"no user {user_id!r}")
        return _user(row)

    async def user_by_email(self, email: str) -> User | None:
        async with self.db.read() as conn:
            row = (
                await conn.execute(sa.select(users).where(users.c.email == email.strip().lower()))
            ).first()
        return None if row is None else _user(row)

    async def list_users(
        self, *, role: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[User]:
        """Accounts in e-mail order, ``limit`` at a time, after the e-mail ``after``."""
        query = sa.select(users).order_by(users.c.email).limit(limit)
        if after is not None:
            query = query.where(users.c.email > after)
        if role is not None:
            query = query.where(users.c.role == role)
        async with self.db.read() as conn:
            return [_user(row) for row in (await conn.execute(query)).all()]

    async def set_active(self, user_id: str, active: bool, *, actor: str = "") -> User:
        """Deactivate (every token and login stops working at once) or reactivate an account."""
        async with self.db.write() as conn:
            done = await conn.execute(
                users.update().where(users.c.id == user_id).values(active=active)
            )
            if done.rowcount == 0:
                raise NotFound(f"no user {user_id!r}")
            if not active:
                await conn.execute(
                    web_sessions_table.delete().where(web_sessions_table.c.user_id == user_id)
                )
            kind = "user_activated" if active else "user_deactivated"
            await self.audit.record_in(conn, kind, actor_id=actor, subject=user_id)
        self._recent.forget_user(user_id)
        return await self.get_user(user_id)

    async def change_password(
        self, user_id: str, password: str, *, current: str | None, actor: str
    ) -> None:
        """Set a new password; an account that has one must prove it with ``current``."""
        async with self.db.read() as conn:
            stored = await conn.scalar(
                sa.select(users.c.password_hash).where(users.c.id == user_id)
            )
        if stored is not None:
            ok = await asyncio.to_thread(verify_password, stored, current or "")
            if not ok:
                raise Forbidden("send the account's current password as current_password")
        await self.set_password(user_id, password, actor=actor)

    async def set_password(self, user_id: str, password: str, *, actor: str = "") -> None:
        if len(password) < 8:
            raise BadRequest("a password needs at least 8 characters")
        hashed = await asyncio.to_thread(hash_password, password)
        async with self.db.write() as conn:
            done = await conn.execute(
                users.update().where(users.c.id == user_id).values(password_hash=hashed)
            )
            if done.rowcount == 0:
                raise NotFound(f"no user {user_id!r}")
            await conn.execute(
                web_sessions_table.delete().where(web_sessions_table.c.user_id == user_id)
            )
            await self.audit.record_in(conn, "password_set", actor_id=actor, subject=user_id)

    async def ensure_admin(self, email: str = "admin@localhost") -> tuple[User, str] | None:
        """On first start (no admin exists): create ``email`` as admin with a random password and
        return it with the password (shown once); else ``None``."""
        from agentica_team.security import new_password

        async with self.db.read() as conn:
            exists = await conn.scalar(sa.select(users.c.id).where(users.c.role == "admin"))
        if exists is not None:
            return None
        password = new_password()
        try:
            user = await self.create_user(email, name="admin", role="admin", password=password)
        except Conflict:  # another worker won the race
            return None
        return user, password

    # -- tokens ---------------------------------------------------------------------------------

    async def issue_token(
        self, user_id: str, *, name: str = "token", days: float | None = None, actor: str = ""
    ) -> IssuedToken:
        async with self.db.write() as conn:
            return await self._issue_token_in(conn, user_id, name=name, days=days, actor=actor)

    async def _issue_token_in(
        self,
        conn: AsyncConnection,
        user_id: str,
        *,
        name: str,
        days: float | None,
        actor: str,
        course_id: str | None = None,
    ) -> IssuedToken:
        if days is not None and not 0 < days <= 3650:
            raise BadRequest("a token lives between a fraction of a day and 3650 days")
        raw = new_token()
        now = self.clock()
        row = {
            "id": new_id("t"),
            "user_id": user_id,
            "course_id": course_id,
            "hash": hash_secret(raw),
            "hint": raw[: len(TOKEN_PREFIX) + 4],
            "name": name[:200] or "token",
            "created_at": now,
            "expires_at": now + (days * 86400 if days else self.token_ttl),
            "revoked_at": None,
            "last_used_at": None,
        }
        await conn.execute(tokens.insert().values(**row))
        await self.audit.record_in(
            conn,
            "token_issued",
            actor_id=actor or user_id,
            subject=user_id,
            data={"token_id": row["id"], "name": row["name"]},
        )
        return IssuedToken(_token(_Obj(row)), raw)

    async def list_tokens(self, user_id: str) -> list[TokenInfo]:
        query = sa.select(tokens).where(tokens.c.user_id == user_id).order_by(tokens.c.created_at)
        async with self.db.read() as conn:
            return [_token(row) for row in (await conn.execute(query)).all()]

    async def revoke_token(self, user_id: str, token_id: str, *, actor: str = "") -> None:
        """Revoke one of ``user_id``'s tokens (``NotFound`` for anyone else's)."""
        async with self.db.write() as conn:
            done = await conn.execute(
                tokens.update()
                .where((tokens.c.id == token_id) & (tokens.c.user_id == user_id))
                .where(tokens.c.revoked_at.is_(None))
                .values(revoked_at=self.clock())
            )
            if done.rowcount == 0:
                raise NotFound(f"no active token {token_id!r}")
            await self.audit.record_in(
                conn,
                "token_revoked",
                actor_id=actor or user_id,
                subject=user_id,
                data={"token_id": token_id},
            )
        self._recent.forget_user(user_id)

    async def principal_for_token(self, raw: str) -> Principal:
        """The account a bearer token belongs to, or ``Unauthorized`` saying why not."""
        if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
            raise Unauthorized("that is not an agentica token (they start with agt_)")
        digest = hash_secret(raw)
        hit = self._recent.token(digest)
        if hit is not None and hit.expires_at > self.clock():
            return hit.principal
        generation = self._recent.generation
        async with self.db.read() as conn:
            row = (await conn.execute(_TOKEN_QUERY, {"digest": digest})).first()
        now = self.clock()
        if row is None or row.revoked_at is not None:
            raise Unauthorized("the token is unknown or revoked: ask your teacher for a new one")
        if row.expires_at <= now:
            raise Unauthorized("the token has expired: create a new one (or ask your teacher)")
        if not row.active:
            raise Unauthorized("the account is deactivated")
        if row.last_used_at is None or now - row.last_used_at > _TOUCH_EVERY:
            async with self.db.write() as conn:
                await conn.execute(
                    tokens.update().where(tokens.c.id == row.id).values(last_used_at=now)
                )
        principal = Principal(
            row.user_id,
            row.email,
            row.user_name,
            row.role,
            "token",
            token_id=row.id,
            course_id=row.course_id,
        )
        self._recent.keep_token(digest, _TokenHit(principal, row.expires_at), generation)
        return principal

    # -- browser logins -------------------------------------------------------------------------

    async def login(
        self, email: str, password: str | None, *, address: str, token: str | None = None
    ) -> WebLogin:
        """A browser session for ``email``, proved by its password or by one of the account's
        tokens (a student's first login with the token their teacher handed out);
        ``Unauthorized`` for a wrong pair. Each attempt takes a slot first (atomically, so
        concurrent guesses cannot slip past): ``RateLimited`` beyond ``login_limit`` a minute
        for the account, or ten times that for one client address (a class behind one router);
        a successful login gives its slot back."""
        address_key = f"addr:{address}"
        email_key = f"email:{email.strip().lower()[:320]}"
        await self._take_attempt({email_key: self.login_limit, address_key: self.login_limit * 10})
        async with self.db.read() as conn:
            user_row = (
                await conn.execute(sa.select(users).where(users.c.email == email.strip().lower()))
            ).first()
        if token is not None:
            ok = user_row is not None and await self._token_of(token, user_row.id)
        else:
            stored = user_row.password_hash if user_row is not None else None
            ok = await asyncio.to_thread(verify_password, stored, password or "")
        if not ok or user_row is None or not user_row.active:
            typed = email.strip().lower()[:200]  # a password typed in the e-mail field stays out
            subject = typed if _EMAIL.match(typed) else "(not an e-mail address)"
            await self.audit.record("login_failed", subject=subject, data={"address": address})
            raise Unauthorized(
                "wrong e-mail or token" if token is not None else "wrong e-mail or password"
            )
        cookie, csrf = new_secret(), new_secret()
        now = self.clock()
        async with self.db.write() as conn:
            await self._give_back_attempt(conn, (email_key, address_key))
            await conn.execute(
                web_sessions_table.insert().values(
                    hash=hash_secret(cookie),
                    user_id=user_row.id,
                    csrf=csrf,
                    created_at=now,
                    expires_at=now + self.web_session_ttl,
                )
            )
            await conn.execute(
                web_sessions_table.delete().where(web_sessions_table.c.expires_at < now)
            )
            how = {"address": address, "with": "token" if token is not None else "password"}
            await self.audit.record_in(
                conn, "login", actor_id=user_row.id, subject=user_row.id, data=how
            )
        principal = Principal(
            user_row.id, user_row.email, user_row.name, user_row.role, "cookie", csrf=csrf
        )
        return WebLogin(principal, cookie, now + self.web_session_ttl)

    async def _token_of(self, raw: str, user_id: str) -> bool:
        """Whether ``raw`` is a valid token of the account ``user_id``."""
        try:
            return (await self.principal_for_token(raw)).user_id == user_id
        except Unauthorized:
            return False

    async def _take_attempt(self, limits: dict[str, int]) -> None:
        """Count one login attempt against each key; refused (and not counted) over a limit.
        The limit holds over any 60 s, not per clock minute: the previous minute's attempts
        count for the part of it still inside the last 60 s (a sliding-window estimate), so a
        burst across a minute's turn gets no second allowance."""
        now = self.clock()
        window = int(now // 60)
        still = 1.0 - (now % 60) / 60  # the share of the previous minute in the last 60 s
        f = login_failures.c
        async with self.db.write() as conn:
            for key, limit in limits.items():
                insert = self.db.insert(login_failures).values(key=key, window=window, count=1)
                upsert = insert.on_conflict_do_update(
                    index_elements=["key", "window"], set_={"count": f.count + 1}
                )
                count = await conn.scalar(upsert.returning(f.count))
                before = await conn.scalar(
                    sa.select(f.count).where((f.key == key) & (f.window == window - 1))
                )
                if count is not None and count + (before or 0) * still > limit:
                    raise RateLimited(  # the rollback takes the counts back
                        "too many login attempts: wait a minute and try again",
                        retry_after=int(60 - self.clock() % 60) + 1,
                    )
            await conn.execute(login_failures.delete().where(login_failures.c.window < window - 5))

    async def _give_back_attempt(self, conn: AsyncConnection, keys: Iterable[str]) -> None:
        window = int(self.clock() // 60)
        await conn.execute(
            login_failures.update()
            .where(login_failures.c.key.in_(list(keys)) & (login_failures.c.window == window))
            .values(count=login_failures.c.count - 1)
        )

    async def principal_for_cookie(self, cookie: str) -> Principal:
        query = sa.select(
            web_sessions_table, users.c.email, users.c.name, users.c.role, users.c.active
        ).join(users, users.c.id == web_sessions_table.c.user_id)
        async with self.db.read() as conn:
            row = (
                await conn.execute(query.where(web_sessions_table.c.hash == hash_secret(cookie)))
            ).first()
        if row is None or row.expires_at <= self.clock() or not row.active:
            raise Unauthorized("the login has expired: log in again")
        return Principal(row.user_id, row.email, row.name, row.role, "cookie", csrf=row.csrf)

    async def logout(self, cookie: str) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                web_sessions_table.delete().where(web_sessions_table.c.hash == hash_secret(cookie))
            )

    # -- courses --------------------------------------------------------------------------------

    async def create_course(
        self, owner: Principal, name: str, *, title: str = "", model: str | None = None
    ) -> Course:
        """A course owned (and taught) by ``owner``; ``name`` is a short handle (``web-2026``)."""
        if not _COURSE_NAME.match(name):
            raise BadRequest(
                f"course name {name[:80]!r} must be 1-64 letters, digits, '.', '_' or '-' "
                "and start with a letter or digit"
            )
        now = self.clock()
        row = {
            "id": new_id("c"),
            "name": name,
            "title": (title or name)[:500],
            "owner_id": owner.user_id,
            "model": model,
            "model_base_url": None,
            "model_api_key": None,
            "max_output_tokens": None,
            "created_at": now,
            "runtime": "",
        }
        async with self.db.write() as conn:
            if await conn.scalar(sa.select(courses.c.id).where(courses.c.name == name)):
                raise Conflict(f"a course named {name!r} exists already")
            await conn.execute(courses.insert().values(**row))
            await conn.execute(
                members.insert().values(
                    course_id=row["id"], user_id=owner.user_id, role="teacher", added_at=now
                )
            )
            await self.audit.record_in(
                conn,
                "course_created",
                actor_id=owner.user_id,
                course_id=str(row["id"]),
                subject=str(row["id"]),
                data={"name": name},
            )
        self._recent.forget_courses()
        return _course(_Obj(row))

    async def get_course(self, course_id: str) -> Course:
        async with self.db.read() as conn:
            row = (await conn.execute(sa.select(courses).where(courses.c.id == course_id))).first()
        if row is None:
            raise NotFound(f"no course {course_id!r}")
        return _course(row)

    async def course_by_name(self, name: str) -> Course:
        async with self.db.read() as conn:
            row = (await conn.execute(sa.select(courses).where(courses.c.name == name))).first()
        if row is None:
            raise NotFound(f"no course named {name!r}")
        return _course(row)

    async def model_config(self, course_id: str) -> tuple[str | None, str | None, str | None]:
        """The course's ``(model, base_url, api_key)``; server-side only."""
        query = sa.select(courses.c.model, courses.c.model_base_url, courses.c.model_api_key)
        async with self.db.read() as conn:
            row = (await conn.execute(query.where(courses.c.id == course_id))).first()
        if row is None:
            raise NotFound(f"no course {course_id!r}")
        return row.model, row.model_base_url, self.open_key(row.model_api_key)

    def open_key(self, stored: str | None) -> str | None:
        """A course's provider key as stored, decrypted."""
        if not stored or self.keys is None:
            return stored
        return self.keys.open(stored)

    async def update_course(self, course_id: str, *, actor: str, **changes: Any) -> Course:
        """Change ``title``, ``model``, ``model_base_url``, ``model_api_key`` (write-only),
        ``max_output_tokens`` or ``runtime``; the audit records which fields changed (and the
        new runtime), never the key."""
        allowed = {"title", "model", "model_base_url", "model_api_key", "max_output_tokens",
                   "runtime"}  # fmt: skip
        unknown = set(changes) - allowed
        if unknown:
            raise BadRequest(f"cannot change {', '.join(sorted(unknown))} of a course")
        if not changes:
            return await self.get_course(course_id)
        values = dict(changes)
        if "model_base_url" in values and "model_api_key" not in values:
            values["model_api_key"] = None  # a key is never sent to a URL it was not set for
        if values.get("model_api_key"):
            if self.keys is None:
                raise BadRequest("this server cannot store provider keys (no secret_key box)")
            values["model_api_key"] = self.keys.seal(values["model_api_key"])
        async with self.db.write() as conn:
            done = await conn.execute(
                courses.update().where(courses.c.id == course_id).values(**values)
            )
            if done.rowcount == 0:
                raise NotFound(f"no course {course_id!r}")
            await self.audit.record_in(
                conn,
                "course_changed",
                actor_id=actor,
                course_id=course_id,
                subject=course_id,
                data={"fields": sorted(changes),
                      **({"runtime": changes["runtime"]} if "runtime" in changes else {})},
            )  # fmt: skip
        self._recent.forget_courses()
        return await self.get_course(course_id)

    async def courses_of(self, principal: Principal) -> list[Course]:
        """The courses ``principal`` can see: all for an admin, else those they are a member of;
        a course token sees its course only."""
        if principal.course_id is not None:
            mine = await self._courses_of_account(principal)
            return [course for course in mine if course.id == principal.course_id]
        return await self._courses_of_account(principal)

    async def _courses_of_account(self, principal: Principal) -> list[Course]:
        key = (principal.user_id, principal.is_admin)
        found = self._recent.courses_of(key)
        if found is not None:
            return found
        generation = self._recent.generation
        async with self.db.read() as conn:
            if principal.is_admin:
                rows = (await conn.execute(_ALL_COURSES)).all()
            else:
                rows = (await conn.execute(_MY_COURSES, {"user_id": principal.user_id})).all()
        found = [_course(row) for row in rows]
        self._recent.keep_courses(key, found, generation)
        return list(found)

    async def member_role(self, course_id: str, user_id: str) -> str | None:
        """``"teacher"``, ``"student"`` or ``None``."""
        query = sa.select(members.c.role).where(
            (members.c.course_id == course_id) & (members.c.user_id == user_id)
        )
        async with self.db.read() as conn:
            role: str | None = await conn.scalar(query)
        return role

    async def teaches(self, teacher_id: str, user_id: str) -> bool:
        """Whether ``teacher_id`` teaches a course ``user_id`` is a student in (a fellow teacher
        of the course is not one of their students)."""
        mine = sa.select(members.c.course_id).where(
            (members.c.user_id == teacher_id) & (members.c.role == "teacher")
        )
        query = sa.select(members.c.user_id).where(
            (members.c.user_id == user_id)
            & (members.c.role == "student")
            & members.c.course_id.in_(mine)
        )
        async with self.db.read() as conn:
            return (await conn.scalar(query.limit(1))) is not None

    async def members(self, course_id: str, *, role: str | None = None) -> list[Member]:
        query = (
            sa.select(users, members.c.role.label("member_role"), members.c.added_at)
            .join(members, members.c.user_id == users.c.id)
            .where(members.c.course_id == course_id)
            .order_by(users.c.email)
        )
        if role is not None:
            query = query.where(members.c.role == role)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [Member(_user(row), row.member_role, row.added_at) for row in rows]

    async def add_member(
        self, course_id: str, user_id: str, role: str, *, actor: str, by_admin: bool = False
    ) -> None:
        """Add ``user_id`` to the course as ``role`` (or change their role in it). Teachers add
        only student accounts as students and teacher accounts as co-teachers; admins anyone."""
        if role not in ("teacher", "student"):
            raise BadRequest(f"a course member is a teacher or a student, not {role!r}")
        user = await self.get_user(user_id)
        if not by_admin and user.role != role:
            raise Forbidden(
                f"{user.email} is a{'n' if user.role == 'admin' else ''} {user.role} account: "
                f"a teacher adds {role} accounts as {role}s only (an admin can add anyone)"
            )
        async with self.db.write() as conn:
            await self._add_member_in(conn, course_id, user_id, role, actor)
        self._recent.forget_courses()

    async def _add_member_in(
        self, conn: AsyncConnection, course_id: str, user_id: str, role: str, actor: str
    ) -> bool:
        """Add or re-role a member (audited when something changed); whether it changed."""
        now = self.clock()
        insert = self.db.insert(members).values(
            course_id=course_id, user_id=user_id, role=role, added_at=now
        )
        done = await conn.execute(
            insert.on_conflict_do_update(
                index_elements=["course_id", "user_id"],
                set_={"role": role},
                where=members.c.role != role,
            )
        )
        if done.rowcount == 0:
            return False
        await self.audit.record_in(
            conn,
            "member_added",
            actor_id=actor,
            course_id=course_id,
            subject=user_id,
            data={"role": role},
        )
        return True

    async def remove_member(self, course_id: str, user_id: str, *, actor: str) -> None:
        """Take ``user_id`` out of the course and revoke the tokens made for it."""
        async with self.db.write() as conn:
            done = await conn.execute(
                members.delete().where(
                    (members.c.course_id == course_id) & (members.c.user_id == user_id)
                )
            )
            if done.rowcount == 0:
                raise NotFound(f"no member {user_id[:64]!r} in this course")
            await self._revoke_course_tokens(conn, course_id, user_id)
            await self.audit.record_in(
                conn, "member_removed", actor_id=actor, course_id=course_id, subject=user_id
            )
        self._recent.forget_courses()
        self._recent.forget_user(user_id)

    async def _revoke_course_tokens(
        self, conn: AsyncConnection, course_id: str, user_id: str
    ) -> None:
        await conn.execute(
            tokens.update()
            .where((tokens.c.user_id == user_id) & (tokens.c.course_id == course_id))
            .where(tokens.c.revoked_at.is_(None))
            .values(revoked_at=self.clock())
        )

    async def add_students(
        self, course: Course, roster: Sequence[tuple[str, str]], *, actor: str
    ) -> list[ProvisionedStudent]:
        """Provision a class in one transaction: an account per ``(email, name)`` (an existing
        student account is reused; a teacher's or admin's is refused, and then nothing is
        added), membership, and a course token with a ready ``agentica connect`` line. A
        student already in the course with a live course token keeps it (``token`` is
        ``None``): run it again safely; ``reissue_token`` replaces a lost one."""
        out: list[ProvisionedStudent] = []
        async with self.db.write() as conn:
            emails = [email for email, _ in roster]
            existing = {
                row.email: row
                for row in (await conn.execute(sa.select(users).where(users.c.email.in_(emails))))
            }
            wrong = [row for row in existing.values() if row.role != "student"]
            if wrong:
                raise Conflict(
                    f"{wrong[0].email} is a {wrong[0].role} account, not a student's: take it off "
                    "the roster (an admin adds teachers to a course)"
                )
            holders = await self._token_holders(conn, course.id, [r.id for r in existing.values()])
            for email, name in roster:
                row = existing.get(email)
                if row is None:
                    user = await self._insert_user(conn, email, name, "student", None, actor)
                else:
                    user = _user(row)
                await self._add_member_in(conn, course.id, user.id, "student", actor)
                if user.id in holders:
                    out.append(ProvisionedStudent(user, False, None, None))
                    continue
                issued = await self._issue_token_in(
                    conn,
                    user.id,
                    name=f"course {course.name}",
                    days=None,
                    actor=actor,
                    course_id=course.id,
                )
                out.append(
                    ProvisionedStudent(user, row is None, issued.token, self.connect_line(issued))
                )
        self._recent.forget_courses()
        return out

    async def _token_holders(
        self, conn: AsyncConnection, course_id: str, user_ids: list[str]
    ) -> set[str]:
        """Which of ``user_ids`` hold a live course token for ``course_id``."""
        if not user_ids:
            return set()
        query = sa.select(tokens.c.user_id).where(
            (tokens.c.course_id == course_id)
            & tokens.c.user_id.in_(user_ids)
            & tokens.c.revoked_at.is_(None)
            & (tokens.c.expires_at > self.clock())
        )
        return {row.user_id for row in await conn.execute(query)}

    def connect_line(self, issued: IssuedToken) -> str:
        return f"agentica connect --server {self.base_url} --token {issued.token} --workspace ."

    async def reissue_token(self, course: Course, user_id: str, *, actor: str) -> IssuedToken:
        """Revoke the student's course tokens for ``course`` and issue a new one."""
        async with self.db.write() as conn:
            await self._revoke_course_tokens(conn, course.id, user_id)
            issued = await self._issue_token_in(
                conn,
                user_id,
                name=f"course {course.name}",
                days=None,
                actor=actor,
                course_id=course.id,
            )
        self._recent.forget_user(user_id)
        return issued


class _Obj:
    """Attribute access over a dict (a row this module just inserted)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
