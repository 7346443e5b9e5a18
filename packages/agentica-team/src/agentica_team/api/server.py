"""``GET /api/server``: what a client needs to know about the server it talks to (its address,
the gateway's, its version and the agent runtimes), for any authenticated caller."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fastapi import APIRouter
from pydantic import BaseModel, Field

from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS
from agentica_team.service import RUNTIMES

__all__ = ["ServerOut", "router"]

router = APIRouter(prefix="/api", tags=["server"], responses=ERRORS)


class ServerOut(BaseModel):
    base_url: str = Field(description="The address students use to reach the server.")
    gateway_url: str = Field(
        description="The OpenAI-compatible gateway: `base_url` + `/v1` (a client's base URL)."
    )
    version: str = Field(description="The team service's version.")
    runtime: str = Field(description="The server's `agent_runtime`: sessions' default.")
    runtimes: list[str] = Field(description="The runtimes a course or a session may choose.")


def _version() -> str:
    try:
        return version("agentica-team")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree not installed
        return "unknown"


@router.get("/server", response_model=ServerOut)
async def server(team: TeamDep, me: PrincipalDep) -> ServerOut:
    """The server's address, its gateway's, its version and its agent runtimes."""
    base = team.settings.base_url
    return ServerOut(
        base_url=base,
        gateway_url=f"{base}/v1",
        version=_version(),
        runtime=team.settings.agent_runtime,
        runtimes=list(RUNTIMES),
    )
