"""The service's typed errors: each one carries the HTTP status and a message that says what was
wrong and how to fix it.

``TeamError`` is an ``AgenticaError``; route handlers raise these and the app turns them into
``{"error": {"type": ..., "message": ..., **detail}}`` with the status below. Nothing else a client
sends may produce a 5xx.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentica.errors import AgenticaError

__all__ = [
    "BadRequest",
    "BudgetExceeded",
    "Conflict",
    "Forbidden",
    "NotFound",
    "RateLimited",
    "ServiceUnavailable",
    "TeamError",
    "Unauthorized",
]


class TeamError(AgenticaError):
    """Base of the service's errors; ``status`` is the HTTP status, ``detail`` extra JSON fields."""

    status: ClassVar[int] = 400
    kind: ClassVar[str] = "bad_request"

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def body(self) -> dict[str, Any]:
        """The JSON error body: ``{"error": {"type", "message", ...detail}}``."""
        return {"error": {"type": self.kind, "message": self.message, **self.detail}}


class BadRequest(TeamError):
    """The request is malformed or asks for something impossible (400)."""


class Unauthorized(TeamError):
    """No credentials, or credentials that are wrong, expired or revoked (401)."""

    status = 401
    kind = "unauthorized"


class Forbidden(TeamError):
    """Authenticated, but this role may not do this (403)."""

    status = 403
    kind = "forbidden"


class NotFound(TeamError):
    """No such resource, or one the caller may not see (404: existence is not revealed)."""

    status = 404
    kind = "not_found"


class Conflict(TeamError):
    """The resource exists already or changed meanwhile (409)."""

    status = 409
    kind = "conflict"


class RateLimited(TeamError):
    """Too many requests or concurrent runs; ``retry_after`` seconds (429)."""

    status = 429
    kind = "rate_limited"


class BudgetExceeded(TeamError):
    """The call would exceed a budget; the detail says which, what remains and when it resets
    (429, refused before any token is spent)."""

    status = 429
    kind = "budget_exceeded"


class ServiceUnavailable(TeamError):
    """Something the service depends on (Redis, the database) cannot be reached (503)."""

    status = 503
    kind = "service_unavailable"
