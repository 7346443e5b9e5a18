"""Who may see and change what: the checks every route runs before it touches a resource.

A resource the caller may not see is a 404 (its existence is not revealed); one they can see but
not change is a 403. Admins see everything; a teacher sees and manages only their own courses,
their students and those students' sessions; a student sees their courses and their own things.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentica_team.accounts import Course
from agentica_team.errors import Forbidden, NotFound
from agentica_team.principal import Principal

if TYPE_CHECKING:
    from agentica_team.service import Team

__all__ = [
    "course_as_member",
    "course_as_teacher",
    "require_account_token",
    "require_admin",
    "require_staff",
    "sees_user",
]


def require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden("only an admin can do this")


def require_account_token(principal: Principal) -> None:
    """Refuse a course token: it cannot manage the account's own credentials."""
    if principal.scoped:
        raise Forbidden(
            "a course token cannot change the account's password or tokens: log in with the "
            "account's password, or use a personal token"
        )


def require_staff(principal: Principal) -> None:
    if principal.role not in ("admin", "teacher"):
        raise Forbidden("only teachers and admins can do this")


async def course_as_member(team: Team, principal: Principal, course_id: str) -> tuple[Course, str]:
    """The course and the caller's role in it (``"admin"`` for admins); 404 for outsiders."""
    if principal.course_id is not None and principal.course_id != course_id:
        raise NotFound(f"no course {course_id!r}")  # a course token acts in its course only
    role = "admin" if principal.is_admin else None
    if role is None:
        role = await team.accounts.member_role(course_id, principal.user_id)
    if role is None:
        raise NotFound(f"no course {course_id!r}")
    return await team.accounts.get_course(course_id), role


async def course_as_teacher(team: Team, principal: Principal, course_id: str) -> Course:
    """The course if the caller teaches it (or is an admin); 404 outsiders, 403 students."""
    course, role = await course_as_member(team, principal, course_id)
    if role == "student":
        raise Forbidden("only the course's teachers can do this")
    return course


async def sees_user(team: Team, principal: Principal, user_id: str) -> bool:
    """Whether ``principal`` may see ``user_id``'s things: themself, an admin, or a teacher of a
    course the user is a student in."""
    if principal.user_id == user_id or principal.is_admin:
        return True
    if principal.role != "teacher" or principal.scoped:
        return False
    return await team.accounts.teaches(principal.user_id, user_id)
