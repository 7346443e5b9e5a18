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
    (a browser login, whose unsafe requests must carry ``csrf``)."""

    user_id: str
    email: str
    name: str
    role: Role
    via: Literal["token", "cookie", "system"]
    token_id: str | None = None
    csrf: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


SYSTEM = Principal(user_id="", email="", name="server", role="admin", via="system")
"""The server itself (the command line on the server's machine acts as this)."""
