"""Routes for the audit: search a course's records, export them (JSONL, CSV) and verify the
hash chain. Teachers of the course and admins; the server-wide chain (logins, accounts) is for
admins only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from agentica_team.access import course_as_teacher, require_admin
from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS
from agentica_team.errors import BadRequest

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["audit"], responses=ERRORS)


class AuditOut(BaseModel):
    id: int
    chain: str
    seq: int
    ts: float
    actor_id: str
    kind: str
    subject: str
    data: dict[str, Any]
    hash: str


class ChainOut(BaseModel):
    chain: str
    records: int
    ok: bool
    problem: str | None
    first_bad_seq: int | None


def _time(value: str | None, name: str) -> float | None:
    """A Unix time or ISO 8601 date/time from a query parameter."""
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)  # like usage days: UTC unless told otherwise
        return moment.timestamp()
    except ValueError:
        raise BadRequest(
            f"{name} must be a Unix time or an ISO 8601 date/time (2026-11-24T09:00:00Z), "
            f"not {value[:40]!r}"
        ) from None


async def _chain(team: Any, me: Any, course_id: str) -> str | None:
    if course_id == "server":
        require_admin(me)
        return None
    await course_as_teacher(team, me, course_id)
    return course_id


@router.get("/courses/{course_id}/audit", response_model=list[AuditOut])
async def search_audit(
    course_id: str,
    team: TeamDep,
    me: PrincipalDep,
    actor_id: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
    after_id: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditOut]:
    """The course's audit records (``server``: the server-wide chain, admins), oldest first,
    filtered by actor (a student's id), kind and time; page with ``after_id``."""
    chain = await _chain(team, me, course_id)
    if not 1 <= limit <= 1000:
        raise BadRequest("limit must be between 1 and 1000")
    records = await team.audit.search(
        course_id=chain,
        actor_id=actor_id,
        kind=kind,
        since=_time(since, "since"),
        until=_time(until, "until"),
        after_id=after_id,
        limit=limit,
    )
    return [
        AuditOut(
            id=r.id,
            chain=r.chain,
            seq=r.seq,
            ts=r.ts,
            actor_id=r.actor_id,
            kind=r.kind,
            subject=r.subject,
            data=r.data,
            hash=r.hash,
        )
        for r in records
    ]


_EXPORT_FORMATS = {
    200: {
        "description": "The records, one per line (JSONL) or as CSV with a header row.",
        "content": {
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/csv": {"schema": {"type": "string"}},
        },
    }
}


@router.get(
    "/courses/{course_id}/audit/export",
    response_class=StreamingResponse,
    responses=_EXPORT_FORMATS,  # type: ignore[arg-type]
)
async def export_audit(
    course_id: str,
    team: TeamDep,
    me: PrincipalDep,
    format: Literal["jsonl", "csv"] = "jsonl",
    actor_id: str | None = None,
    kind: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> StreamingResponse:
    """The course's audit records as JSON lines or CSV, streamed."""
    chain = await _chain(team, me, course_id)
    media = "application/x-ndjson" if format == "jsonl" else "text/csv"
    body = team.audit.export(
        course_id=chain,
        fmt=format,
        actor_id=actor_id,
        kind=kind,
        since=_time(since, "since"),
        until=_time(until, "until"),
    )
    name = f"audit-{course_id}.{format}"
    return StreamingResponse(
        body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


@router.get("/courses/{course_id}/audit/verify", response_model=list[ChainOut])
async def verify_audit(course_id: str, team: TeamDep, me: PrincipalDep) -> list[ChainOut]:
    """Check the course's hash chain: any altered, removed, inserted or reordered record is
    reported with the first bad sequence number."""
    chain = await _chain(team, me, course_id)
    reports = await team.audit.verify("" if chain is None else chain)
    return [
        ChainOut(
            chain=r.chain,
            records=r.records,
            ok=r.ok,
            problem=r.problem,
            first_bad_seq=r.first_bad_seq,
        )
        for r in reports
    ]
