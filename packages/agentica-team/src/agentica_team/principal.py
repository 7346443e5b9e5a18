"""``Principal``: who is making a request (an account and how it proved itself), and roles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ROLES", "Principal", "Role"]

Role = Literal["admin", "teacher", "student"]
ROLES: tuple[Role, ...] = ("admin", "teacher", "student")


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated account: ``via`` is ``"token"`` (a personal API token) or ``"cookie"``
    (a browser login, whose unsafe requests must carry ``csrf``); ``course_id`` is set for a
    course token, which a teacher's provisioning issues and which acts in that course only."""

    user_id: str
    email: str
    name: str
    role: Role
    via: Literal["token", "cookie", "system"]
    token_id: str | None = None
    csrf: str | None = None
    course_id: str | None = None  # a course token: it acts in this course only

    @property
    def scoped(self) -> bool:
        """Whether this is a course token (it cannot manage the account's credentials)."""
        return self.course_id is not None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


SYSTEM = Principal(user_id="", email="", name="server", role="admin", via="system")
"""The server itself (the command line on the server's machine acts as this)."""
