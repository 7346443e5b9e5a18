"""Routes for courses: create and configure them, their members, provisioning a class from a
roster, budgets and usage. Teachers manage only their own courses; students see their own."""

from __future__ import annotations

from fastapi import APIRouter

from agentica_team.access import course_as_member, course_as_teacher, require_staff
from agentica_team.accounts import Course, parse_roster
from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import (
    ERRORS,
    BudgetBody,
    BudgetOut,
    CourseBody,
    CourseChange,
    CourseOut,
    IssuedTokenOut,
    MemberBody,
    MemberOut,
    ProvisionedOut,
    RemainingOut,
    RosterBody,
    TokenOut,
    UsageOut,
    UserOut,
)
from agentica_team.errors import BadRequest, Forbidden, NotFound

__all__ = ["router"]

router = APIRouter(prefix="/api/courses", tags=["courses"], responses=ERRORS)
_MICROS = 1_000_000


@router.get("", response_model=list[CourseOut])
async def list_courses(team: TeamDep, me: PrincipalDep) -> list[CourseOut]:
    """The courses the caller is a member of (admins: all)."""
    out = []
    for course in await team.accounts.courses_of(me):
        role = "admin" if me.is_admin else await team.accounts.member_role(course.id, me.user_id)
        out.append(_course_out(course, role))
    return out


@router.post("", response_model=CourseOut, status_code=201)
async def create_course(body: CourseBody, team: TeamDep, me: PrincipalDep) -> CourseOut:
    """A new course taught by the caller (teachers and admins)."""
    require_staff(me)
    course = await team.accounts.create_course(me, body.name, title=body.title)
    return CourseOut.of(course, "teacher")


@router.get("/{course_id}", response_model=CourseOut)
async def get_course(course_id: str, team: TeamDep, me: PrincipalDep) -> CourseOut:
    """A course the caller is a member of, with their role in it."""
    course, role = await course_as_member(team, me, course_id)
    return _course_out(course, role)


@router.patch("/{course_id}", response_model=CourseOut)
async def change_course(
    course_id: str, body: CourseChange, team: TeamDep, me: PrincipalDep
) -> CourseOut:
    """Change the title, the model: ``model`` (a model string), ``model_base_url``,
    ``model_api_key`` (write-only: responses only say whether one is set; ``""`` removes it)
    and ``max_output_tokens``, or the ``runtime`` of the course's new sessions (``""``: the
    server's). Audited (``course_changed``: the fields changed, and the new runtime)."""
    await course_as_teacher(team, me, course_id)
    changes = body.model_dump(exclude_unset=True)
    for name, what in (("title", "a title"), ("runtime", '"serial", "batch", "lanes" or ""')):
        if name in changes and changes[name] is None:
            raise BadRequest(f"{name} cannot be null: send {what}, or leave the field out")
    if "model_api_key" in changes and changes["model_api_key"] == "":
        changes["model_api_key"] = None
    if "model_base_url" in changes and not me.is_admin:
        raise Forbidden(
            "only an admin can point a course at a custom endpoint (model_base_url); a teacher "
            "chooses a provider's model string (e.g. deepseek:deepseek-chat) and its key"
        )
    if changes.get("model_base_url") and not str(changes["model_base_url"]).startswith(
        ("http://", "https://")
    ):
        raise BadRequest("model_base_url must be an http:// or https:// URL")
    if changes.get("model"):
        team.models.check(str(changes["model"]), str(changes.get("model_base_url") or ""))
    course = await team.accounts.update_course(course_id, actor=me.user_id, **changes)
    return CourseOut.of(course, "teacher")


@router.get("/{course_id}/members", response_model=list[MemberOut])
async def list_members(course_id: str, team: TeamDep, me: PrincipalDep) -> list[MemberOut]:
    """The course's teachers and students (teachers of the course)."""
    await course_as_teacher(team, me, course_id)
    return [MemberOut.of(member) for member in await team.accounts.members(course_id)]


@router.post("/{course_id}/members", response_model=MemberOut, status_code=201)
async def add_member(
    course_id: str, body: MemberBody, team: TeamDep, me: PrincipalDep
) -> MemberOut:
    """Add an existing account as a teacher or student of the course."""
    await course_as_teacher(team, me, course_id)
    user = await team.accounts.user_by_email(body.email)
    if user is None:
        raise NotFound(f"no account {body.email[:100]!r}: add students with POST .../students")
    await team.accounts.add_member(
        course_id, user.id, body.role, actor=me.user_id, by_admin=me.is_admin
    )
    for member in await team.accounts.members(course_id):
        if member.user.id == user.id:
            return MemberOut.of(member)
    raise NotFound(f"no account {body.email[:100]!r}")  # pragma: no cover - just added


@router.post("/{course_id}/students", response_model=list[ProvisionedOut], status_code=201)
async def add_students(
    course_id: str, body: RosterBody, team: TeamDep, me: PrincipalDep
) -> list[ProvisionedOut]:
    """Provision students from a roster: an account each (existing ones are reused), membership
    and a personal token with a ready ``agentica connect`` line (shown once)."""
    course = await course_as_teacher(team, me, course_id)
    done = await team.accounts.add_students(course, parse_roster(body.roster), actor=me.user_id)
    return [
        ProvisionedOut(user=UserOut.of(s.user), created=s.created, token=s.token, connect=s.connect)
        for s in done
    ]


@router.post(
    "/{course_id}/students/{user_id}/token", response_model=IssuedTokenOut, status_code=201
)
async def reissue_token(
    course_id: str, user_id: str, team: TeamDep, me: PrincipalDep
) -> IssuedTokenOut:
    """Revoke a student's course token and issue a new one (shown once, with its ready
    ``agentica connect`` line)."""
    course = await course_as_teacher(team, me, course_id)
    if await team.accounts.member_role(course_id, user_id) != "student":
        raise NotFound(f"no student {user_id[:64]!r} in this course")
    issued = await team.accounts.reissue_token(course, user_id, actor=me.user_id)
    return IssuedTokenOut(
        **TokenOut.of(issued.info).model_dump(),
        token=issued.token,
        connect=team.accounts.connect_line(issued),
    )


@router.delete("/{course_id}/members/{user_id}", status_code=204)
async def remove_member(course_id: str, user_id: str, team: TeamDep, me: PrincipalDep) -> None:
    """Take a member out of the course; the course tokens made for them stop working."""
    await course_as_teacher(team, me, course_id)
    if user_id == me.user_id:
        raise Forbidden("you cannot remove yourself from a course you teach")
    await team.accounts.remove_member(course_id, user_id[:64], actor=me.user_id)


def _course_out(course: Course, role: str | None) -> CourseOut:
    """A course as ``role`` may see it: students do not see the endpoint it uses."""
    out = CourseOut.of(course, role)
    if role == "student":
        out.model_base_url = None
    return out


# -- budgets and usage ---------------------------------------------------------------------------


def _usd(micros: int | None) -> float | None:
    return None if micros is None else micros / _MICROS


@router.get("/{course_id}/budgets", response_model=list[BudgetOut])
async def list_budgets(course_id: str, team: TeamDep, me: PrincipalDep) -> list[BudgetOut]:
    """The course's budgets (teachers of the course)."""
    await course_as_teacher(team, me, course_id)
    return [_budget_out(b) for b in await team.budgets.list_budgets(course_id)]


@router.put("/{course_id}/budgets", response_model=BudgetOut)
async def set_budget(
    course_id: str, body: BudgetBody, team: TeamDep, me: PrincipalDep
) -> BudgetOut:
    """Set (create or replace) the course's total budget (``scope: course``), every student's
    default (``scope: student``, no ``user_id``) or one student's (``user_id``): tokens and/or
    US dollars per ``day``, ``week`` or the whole ``course``, and optional rate limits."""
    await course_as_teacher(team, me, course_id)
    if body.user_id and await team.accounts.member_role(course_id, body.user_id) != "student":
        raise NotFound(f"no student {body.user_id[:64]!r} in this course")
    cost = None if body.max_cost_usd is None else round(body.max_cost_usd * _MICROS)
    info = await team.budgets.set_budget(
        course_id,
        scope=body.scope,
        user_id=body.user_id,
        period=body.period,
        max_tokens=body.max_tokens,
        max_cost_micros=cost,
        requests_per_minute=body.requests_per_minute,
        max_concurrent=body.max_concurrent,
        actor=me.user_id,
    )
    return _budget_out(info)


@router.delete("/{course_id}/budgets/{budget_id}", status_code=204)
async def delete_budget(course_id: str, budget_id: str, team: TeamDep, me: PrincipalDep) -> None:
    """Remove a budget with its usage counters (calls in progress settle without it)."""
    await course_as_teacher(team, me, course_id)
    if not await team.budgets.delete_budget(course_id, budget_id[:64], actor=me.user_id):
        raise NotFound(f"no budget {budget_id[:64]!r} in this course")


@router.get("/{course_id}/remaining", response_model=list[RemainingOut])
async def remaining(
    course_id: str, team: TeamDep, me: PrincipalDep, user_id: str | None = None
) -> list[RemainingOut]:
    """What is left of the budgets that apply to a student (default: the caller)."""
    _, role = await course_as_member(team, me, course_id)
    subject = user_id or me.user_id
    if subject != me.user_id and role == "student":
        raise NotFound(f"no student {subject[:64]!r} visible to you")
    rows = await team.budgets.remaining(course_id, subject)
    return [
        RemainingOut(
            budget_id=r.budget_id,
            scope=r.scope,
            period=r.period,
            max_tokens=r.max_tokens,
            max_cost_usd=_usd(r.max_cost_micros),
            used_tokens=r.used_tokens,
            used_cost_usd=r.used_cost_micros / _MICROS,
            reserved_tokens=r.reserved_tokens,
            reserved_cost_usd=r.reserved_cost_micros / _MICROS,
            resets_at=r.resets_at,
        )
        for r in rows
    ]


@router.get("/{course_id}/usage", response_model=list[UsageOut])
async def usage(
    course_id: str,
    team: TeamDep,
    me: PrincipalDep,
    user_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[UsageOut]:
    """Usage per student and day (``since``/``until``: ``YYYY-MM-DD``, inclusive); a student
    sees only their own."""
    _, role = await course_as_member(team, me, course_id)
    if role == "student":
        user_id = me.user_id
    rows = await team.budgets.usage(course_id, user_id=user_id, since=since, until=until)
    return [
        UsageOut(
            course_id=r.course_id,
            user_id=r.user_id,
            day=r.day,
            source=r.source,
            requests=r.requests,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            cost_usd=r.cost_micros / _MICROS,
            cached_tokens=r.cached_tokens,
            compaction_saved_tokens=r.compaction_saved_tokens,
        )
        for r in rows
    ]


def _budget_out(info: object) -> BudgetOut:
    from agentica_team.budgets import BudgetInfo

    assert isinstance(info, BudgetInfo)
    return BudgetOut(
        id=info.id,
        course_id=info.course_id,
        scope=info.scope,
        user_id=info.user_id,
        period=info.period,
        max_tokens=info.max_tokens,
        max_cost_usd=_usd(info.max_cost_micros),
        requests_per_minute=info.requests_per_minute,
        max_concurrent=info.max_concurrent,
        updated_at=info.updated_at,
    )
