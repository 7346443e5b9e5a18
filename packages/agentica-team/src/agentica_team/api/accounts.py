"""Routes for logging in, the caller's own account and tokens, and accounts (admins)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from agentica_team.access import require_account_token, require_admin, sees_user
from agentica_team.api.deps import COOKIE, PrincipalDep, TeamDep
from agentica_team.api.schemas import (
    ERRORS,
    IssuedTokenOut,
    LoginBody,
    MeOut,
    PasswordBody,
    TokenBody,
    TokenOut,
    UserBody,
    UserChange,
    UserOut,
)
from agentica_team.errors import BadRequest, Forbidden, NotFound

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["accounts"], responses=ERRORS)


@router.post("/auth/login", response_model=MeOut)
async def login(body: LoginBody, request: Request, response: Response, team: TeamDep) -> MeOut:
    """Log a browser in with the e-mail and the password or a token: sets the session cookie
    and returns the CSRF value to send back in ``X-CSRF-Token`` on every request that changes
    something. Rate-limited."""
    address = request.client.host if request.client else "unknown"
    if (body.password is None) == (body.token is None):
        raise BadRequest("send either `password` or `token` (your agt_... token), not both")
    done = await team.accounts.login(body.email, body.password, address=address, token=body.token)
    response.set_cookie(
        COOKIE,
        done.cookie,
        max_age=int(team.settings.web_session_hours * 3600),
        httponly=True,
        samesite="strict",
        secure=team.settings.secure_cookies,
        path="/",
    )
    user = await team.accounts.get_user(done.principal.user_id)
    return MeOut(**UserOut.of(user).model_dump(), csrf_token=done.principal.csrf)


@router.post("/auth/logout", status_code=204)
async def logout(request: Request, response: Response, team: TeamDep, me: PrincipalDep) -> None:
    """End the browser login (its cookie stops working)."""
    cookie = request.cookies.get(COOKIE)
    if cookie:
        await team.accounts.logout(cookie)
    response.delete_cookie(COOKIE, path="/")


@router.get("/me", response_model=MeOut)
async def me(team: TeamDep, me: PrincipalDep) -> MeOut:
    """The caller's account (and, for a browser login, its CSRF value)."""
    user = await team.accounts.get_user(me.user_id)
    return MeOut(**UserOut.of(user).model_dump(), csrf_token=me.csrf)


@router.post("/me/password", status_code=204)
async def set_my_password(body: PasswordBody, team: TeamDep, me: PrincipalDep) -> None:
    """Set the caller's password (every browser login of the account ends); an account that
    has one must send it as ``current_password``. Not with a course token."""
    require_account_token(me)
    await team.accounts.change_password(
        me.user_id, body.password, current=body.current_password, actor=me.user_id
    )


@router.get("/me/tokens", response_model=list[TokenOut])
async def my_tokens(team: TeamDep, me: PrincipalDep) -> list[TokenOut]:
    """The caller's personal tokens (never the tokens themselves)."""
    return [TokenOut.of(info) for info in await team.accounts.list_tokens(me.user_id)]


@router.post("/me/tokens", response_model=IssuedTokenOut, status_code=201)
async def new_token(body: TokenBody, team: TeamDep, me: PrincipalDep) -> IssuedTokenOut:
    """A new personal token for programs; the response is the only time it is shown (with
    the ``agentica connect`` line that connects a computer with it). Not with a course
    token."""
    require_account_token(me)
    issued = await team.accounts.issue_token(me.user_id, name=body.name, days=body.days)
    return IssuedTokenOut(
        **TokenOut.of(issued.info).model_dump(),
        token=issued.token,
        connect=team.accounts.connect_line(issued),
    )


@router.delete("/me/tokens/{token_id}", status_code=204)
async def revoke_token(token_id: str, team: TeamDep, me: PrincipalDep) -> None:
    """Revoke one of the caller's tokens."""
    require_account_token(me)
    await team.accounts.revoke_token(me.user_id, token_id[:64], actor=me.user_id)


@router.get("/users", response_model=list[UserOut])
async def list_users(
    team: TeamDep,
    me: PrincipalDep,
    role: Literal["admin", "teacher", "student"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after: Annotated[str | None, Query(max_length=320)] = None,
) -> list[UserOut]:
    """Accounts in e-mail order (admins): ``limit`` at a time; the next page starts ``after``
    the last e-mail of this one."""
    require_admin(me)
    found = await team.accounts.list_users(role=role, limit=limit, after=after)
    return [UserOut.of(user) for user in found]


@router.post("/users", response_model=UserOut, status_code=201)
async def create_user(body: UserBody, team: TeamDep, me: PrincipalDep) -> UserOut:
    """Create an account (admins); teachers add students through their courses."""
    require_admin(me)
    user = await team.accounts.create_user(
        body.email, name=body.name, role=body.role, password=body.password, actor=me.user_id
    )
    return UserOut.of(user)


@router.get("/users/{user_id}", response_model=UserOut)
async def get_user(user_id: str, team: TeamDep, me: PrincipalDep) -> UserOut:
    """An account the caller may see (themself; a teacher their students; admins anyone)."""
    if not await sees_user(team, me, user_id):
        raise NotFound(f"no user {user_id[:64]!r}")
    return UserOut.of(await team.accounts.get_user(user_id))


@router.patch("/users/{user_id}", response_model=UserOut)
async def change_user(user_id: str, body: UserChange, team: TeamDep, me: PrincipalDep) -> UserOut:
    """Deactivate or reactivate an account, everywhere (admins; a teacher removes a student
    from their course with DELETE /api/courses/{id}/members/{user_id})."""
    require_admin(me)
    if user_id == me.user_id:
        raise Forbidden("you cannot change whether your own account is active")
    return UserOut.of(await team.accounts.set_active(user_id, body.active, actor=me.user_id))
