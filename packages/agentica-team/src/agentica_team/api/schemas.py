"""The request and response bodies of the accounts, courses and budgets routes (pydantic).

Request models forbid unknown fields and bound every string and number, so a malformed or
oversized body is a 422 that names the field; response models never carry a secret (a course says
whether a provider key is set, never the key).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentica_team.accounts import Course, Member, TokenInfo, User

__all__ = [
    "ERRORS",
    "JSON_ERRORS",
    "BudgetBody",
    "BudgetOut",
    "CourseBody",
    "CourseChange",
    "CourseOut",
    "IssuedTokenOut",
    "LoginBody",
    "MeOut",
    "MemberBody",
    "MemberOut",
    "PasswordBody",
    "ProvisionedOut",
    "RemainingOut",
    "RosterBody",
    "TokenBody",
    "TokenOut",
    "UsageOut",
    "UserBody",
    "UserChange",
    "UserOut",
]

Short = Annotated[str, Field(min_length=1, max_length=200)]


class ErrorDetail(BaseModel):
    type: str = Field(description="What kind of error: unauthorized, forbidden, not_found, ...")
    message: str = Field(description="What was wrong and how to fix it.")


class ErrorOut(BaseModel):
    """Every error answer: ``{"error": {"type", "message", ...}}`` (some add fields, e.g. a
    budget refusal's ``remaining_tokens`` and ``resets_at``, or ``retry_after``)."""

    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (400, "The request asks for something impossible."),
        (401, "No credentials, or wrong, expired or revoked ones."),
        (403, "Not allowed for this account or token."),
        (404, "No such thing, or one the caller may not see."),
        (409, "It exists already or changed meanwhile."),
        (413, "The body is larger than the server accepts."),
        (422, "The body or a parameter is malformed; the message names it."),
        (429, "A rate limit or budget refused it (see retry_after / resets_at)."),
    )
}
"""The error answers every router documents (the routers pass ``responses=ERRORS``)."""

JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": entry["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }
    for status, entry in ERRORS.items()
}
"""``ERRORS`` for a route whose own answers are not JSON (a stream): its errors still are."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoginBody(_Body):
    """The e-mail with the password, or with one of the account's tokens (``agt_...``: a
    student's first login with the token their teacher handed out)."""

    email: Annotated[str, Field(min_length=3, max_length=320)]
    password: Annotated[str, Field(min_length=1, max_length=1000)] | None = None
    token: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class PasswordBody(_Body):
    password: Annotated[str, Field(min_length=8, max_length=1000)]
    current_password: Annotated[str, Field(max_length=1000)] | None = None


class UserBody(_Body):
    email: Annotated[str, Field(min_length=3, max_length=320)]
    name: Annotated[str, Field(max_length=200)] = ""
    role: Literal["admin", "teacher", "student"] = "student"
    password: Annotated[str, Field(min_length=8, max_length=1000)] | None = None


class UserChange(_Body):
    active: bool


class TokenBody(_Body):
    name: Short = "token"
    days: Annotated[float, Field(gt=0, le=3650)] | None = None


class CourseBody(_Body):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    title: Annotated[str, Field(max_length=500)] = ""


class CourseChange(_Body):
    title: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    model: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    model_base_url: Annotated[str, Field(max_length=2000)] | None = None
    model_api_key: Annotated[str, Field(max_length=2000)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    runtime: Literal["", "serial", "batch", "lanes"] | None = Field(
        default=None,
        description="The runtime of the course's new sessions (a session created with its own "
        "`runtime` keeps that); empty: the server's `agent_runtime`.",
    )


class MemberBody(_Body):
    email: Annotated[str, Field(min_length=3, max_length=320)]
    role: Literal["teacher", "student"] = "student"


class RosterBody(_Body):
    """A CSV (``email[,name]`` rows, header optional) or e-mails separated by newlines/commas."""

    roster: Annotated[str, Field(min_length=3, max_length=500_000)]


class BudgetBody(_Body):
    scope: Literal["course", "student"]
    user_id: Annotated[str, Field(max_length=64)] = ""
    period: Literal["day", "week", "course"]
    max_tokens: Annotated[int, Field(ge=0, le=10**12)] | None = None
    max_cost_usd: Annotated[float, Field(ge=0, le=10**6)] | None = None
    requests_per_minute: Annotated[int, Field(ge=1, le=100_000)] | None = None
    max_concurrent: Annotated[int, Field(ge=1, le=10_000)] | None = None


class UserOut(BaseModel):
    id: str
    email: str
    name: str
    role: str
    active: bool
    created_at: float

    @classmethod
    def of(cls, user: User) -> UserOut:
        return cls(
            id=user.id,
            email=user.email,
            name=user.name,
            role=user.role,
            active=user.active,
            created_at=user.created_at,
        )


class MeOut(UserOut):
    csrf_token: str | None = None


class TokenOut(BaseModel):
    id: str
    name: str
    hint: str
    created_at: float
    expires_at: float
    revoked_at: float | None
    last_used_at: float | None

    @classmethod
    def of(cls, info: TokenInfo) -> TokenOut:
        return cls(
            id=info.id,
            name=info.name,
            hint=info.hint,
            created_at=info.created_at,
            expires_at=info.expires_at,
            revoked_at=info.revoked_at,
            last_used_at=info.last_used_at,
        )


class IssuedTokenOut(TokenOut):
    token: str = Field(description="The token itself: shown this once, store it now.")
    connect: str | None = Field(
        default=None,
        description="The `agentica connect --server ... --token ... --workspace .` line that "
        "connects a computer with this token, ready to paste.",
    )


class CourseOut(BaseModel):
    id: str
    name: str
    title: str
    owner_id: str
    model: str | None
    model_base_url: str | None
    model_api_key_set: bool
    max_output_tokens: int | None
    created_at: float
    runtime: str = Field(
        default="", description="The runtime of new sessions; empty: the server's."
    )
    role: str | None = None

    @classmethod
    def of(cls, course: Course, role: str | None = None) -> CourseOut:
        return cls(
            id=course.id,
            name=course.name,
            title=course.title,
            owner_id=course.owner_id,
            model=course.model,
            model_base_url=course.model_base_url,
            model_api_key_set=course.model_api_key_set,
            max_output_tokens=course.max_output_tokens,
            created_at=course.created_at,
            runtime=course.runtime,
            role=role,
        )


class MemberOut(BaseModel):
    user: UserOut
    role: str
    added_at: float

    @classmethod
    def of(cls, member: Member) -> MemberOut:
        return cls(user=UserOut.of(member.user), role=member.role, added_at=member.added_at)


class ProvisionedOut(BaseModel):
    user: UserOut
    created: bool
    token: str | None = Field(
        description="The student's course token, shown once; null when they already held one "
        "for this course (re-issue it with POST .../students/{user_id}/token)."
    )
    connect: str | None


class BudgetOut(BaseModel):
    id: str
    course_id: str
    scope: str
    user_id: str
    period: str
    max_tokens: int | None
    max_cost_usd: float | None
    requests_per_minute: int | None
    max_concurrent: int | None
    updated_at: float


class RemainingOut(BaseModel):
    budget_id: str
    scope: str
    period: str
    max_tokens: int | None
    max_cost_usd: float | None
    used_tokens: int
    used_cost_usd: float
    reserved_tokens: int
    reserved_cost_usd: float
    resets_at: float | None


class UsageOut(BaseModel):
    course_id: str
    user_id: str
    day: str
    source: str
    requests: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    cached_tokens: int
    compaction_saved_tokens: int
