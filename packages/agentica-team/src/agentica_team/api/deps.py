"""Request dependencies: the service (``TeamDep``) and the caller (``PrincipalDep``).

A caller proves itself with ``Authorization: Bearer agt_...`` (a personal token, for programs) or
with the browser's login cookie; a cookie request that changes something must also send the
login's CSRF value in ``X-CSRF-Token``. Anything else is a 401 saying how to authenticate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from agentica_team.errors import Forbidden, Unauthorized
from agentica_team.principal import Principal
from agentica_team.security import same

if TYPE_CHECKING:
    from agentica_team.service import Team

__all__ = ["COOKIE", "CSRF_HEADER", "PrincipalDep", "TeamDep", "get_principal", "get_team"]

COOKIE = "agentica_session"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_bearer = HTTPBearer(auto_error=False, description="A personal API token (agt_...)")
_cookie = APIKeyCookie(name=COOKIE, auto_error=False, description="A browser login")


async def get_team(request: Request) -> Team:
    """The service the app was started with (``async``: a plain function would be run on a
    worker thread, a thread hop on every request)."""
    team: Team = request.app.state.team
    return team


TeamDep = Annotated["Team", Depends(get_team)]


async def get_principal(
    request: Request,
    team: TeamDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    cookie: Annotated[str | None, Security(_cookie)],
) -> Principal:
    """The authenticated caller (``Unauthorized``/``Forbidden`` otherwise)."""
    if request.headers.get("authorization"):
        if bearer is None:
            raise Unauthorized("send the token as `Authorization: Bearer agt_...`")
        return await team.accounts.principal_for_token(bearer.credentials)
    if cookie:
        principal = await team.accounts.principal_for_cookie(cookie)
        sent = request.headers.get(CSRF_HEADER, "")
        if request.method not in _SAFE_METHODS and not same(sent, principal.csrf or ""):
            raise Forbidden(
                f"a logged-in browser must send the login's CSRF value in {CSRF_HEADER} "
                "(it is returned by POST /api/auth/login and GET /api/me)"
            )
        return principal
    raise Unauthorized("log in, or send a personal token as `Authorization: Bearer agt_...`")


PrincipalDep = Annotated[Principal, Depends(get_principal)]
