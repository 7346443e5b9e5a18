"""Accounts, logins, tokens, courses and provisioning of the team service, over real HTTP."""

from __future__ import annotations

import asyncio
import csv
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentica_team.accounts import parse_roster
from agentica_team.errors import BadRequest, Unauthorized
from agentica_team.principal import Principal
from agentica_team.settings import TeamSettings
from tests.team.server import client, serve_team, sqlite_settings
from tests.team.test_sessions import make_class


async def _login(url: str, email: str, password: str) -> tuple[object, str]:
    session = client(url)
    async with session.post("/api/auth/login", json={"email": email, "password": password}) as r:
        assert r.status == 200, await r.text()
        body = await r.json()
    return session, body["csrf_token"]


async def _class(url: str, team: object) -> dict[str, str]:
    """An admin, a teacher with a course, and two students (tokens) in it."""
    admin = team.first_admin  # type: ignore[attr-defined]
    browser, csrf = await _login(url, admin.user.email, admin.password)
    async with (
        browser,
        browser.post(
            "/api/users",
            json={"email": "t@school.edu", "role": "teacher", "password": "teacher-pass-1"},
            headers={"X-CSRF-Token": csrf},
        ) as r,
    ):
        assert r.status == 201, await r.text()
    async with (
        client(url) as anon,
        anon.post(
            "/api/auth/login", json={"email": "t@school.edu", "password": "teacher-pass-1"}
        ) as r,
    ):
        teacher_csrf = (await r.json())["csrf_token"]
        cookie = r.cookies["agentica_session"].value
    async with client(url) as teacher:
        teacher.cookie_jar.update_cookies({"agentica_session": cookie})
        headers = {"X-CSRF-Token": teacher_csrf}
        async with teacher.post("/api/courses", json={"name": "web-2026"}, headers=headers) as r:
            course = await r.json()
        roster = "email,name\nann@school.edu,Ann\nbob@school.edu,Bob\n"
        async with teacher.post(
            f"/api/courses/{course['id']}/students", json={"roster": roster}, headers=headers
        ) as r:
            assert r.status == 201, await r.text()
            students = await r.json()
        async with teacher.post("/api/me/tokens", json={"name": "cli"}, headers=headers) as r:
            teacher_token = (await r.json())["token"]
    return {
        "course": course["id"],
        "ann": students[0]["token"],
        "ann_id": students[0]["user"]["id"],
        "bob": students[1]["token"],
        "bob_id": students[1]["user"]["id"],
        "connect": students[0]["connect"],
        "teacher": teacher_token,
    }


async def test_a_class_is_provisioned_and_each_role_sees_what_it_should(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await _class(url, team)
        assert c["connect"].startswith("agentica connect --server http://127.0.0.1:8000 ")
        assert c["ann"] in c["connect"]
        async with client(url, c["ann"]) as ann:
            async with ann.get("/api/me") as r:
                assert (await r.json())["email"] == "ann@school.edu"
            async with ann.get("/api/courses") as r:
                courses = await r.json()
                assert [x["role"] for x in courses] == ["student"]
            async with ann.post("/api/courses", json={"name": "mine"}) as r:
                assert r.status == 403
                assert "teachers" in (await r.json())["error"]["message"]
            async with ann.get(f"/api/courses/{c['course']}/members") as r:
                assert r.status == 403
            async with ann.get(f"/api/users/{c['bob_id']}") as r:
                assert r.status == 404
        async with client(url, c["teacher"]) as teacher:
            async with teacher.get(f"/api/courses/{c['course']}/members") as r:
                emails = sorted(m["user"]["email"] for m in await r.json())
                assert emails == ["ann@school.edu", "bob@school.edu", "t@school.edu"]
            async with teacher.get(f"/api/users/{c['ann_id']}") as r:
                assert r.status == 200


async def test_a_teacher_of_another_course_sees_nothing_of_this_one(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await _class(url, team)
        other = await team.accounts.create_user("o@school.edu", role="teacher")
        issued = await team.accounts.issue_token(other.id)
        async with client(url, issued.token) as outsider:
            for path in (
                f"/api/courses/{c['course']}",
                f"/api/courses/{c['course']}/members",
                f"/api/users/{c['ann_id']}",
            ):
                async with outsider.get(path) as r:
                    assert r.status == 404, path
            async with outsider.patch(f"/api/users/{c['ann_id']}", json={"active": False}) as r:
                assert r.status == 403  # admins only, whoever the account is


async def test_tokens_are_revoked_reissued_and_stop_with_deactivation(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await _class(url, team)
        async with (
            client(url, c["teacher"]) as teacher,
            teacher.post(f"/api/courses/{c['course']}/students/{c['ann_id']}/token") as r,
        ):
            assert r.status == 201
            new = (await r.json())["token"]
        async with client(url, c["ann"]) as old, old.get("/api/me") as r:
            assert r.status == 401
            assert "revoked" in (await r.json())["error"]["message"]
        async with client(url, new) as ann:
            async with ann.get("/api/me") as r:
                assert r.status == 200
            async with ann.post("/api/me/tokens", json={"name": "laptop"}) as r:
                assert r.status == 403  # a course token cannot mint account tokens
                assert "course token" in (await r.json())["error"]["message"]
        async with client(url, c["teacher"]) as teacher:
            async with teacher.post("/api/me/tokens", json={"name": "laptop"}) as r:
                laptop = await r.json()
            async with teacher.get("/api/me/tokens") as r:
                listed = await r.json()
                assert all("token" not in t for t in listed)
                assert laptop["id"] in [t["id"] for t in listed]
            async with teacher.delete(f"/api/me/tokens/{laptop['id']}") as r:
                assert r.status == 204
            ann_path = f"/api/users/{c['ann_id']}"
            async with teacher.patch(ann_path, json={"active": False}) as r:
                assert r.status == 403  # accounts are (de)activated by admins only
        async with client(url, laptop["token"]) as gone, gone.get("/api/me") as r:
            assert r.status == 401
        admin = await team.accounts.issue_token(team.first_admin.user.id)  # type: ignore[union-attr]
        async with client(url, admin.token) as a, a.patch(ann_path, json={"active": False}) as r:
            assert r.status == 200
        async with client(url, new) as ann, ann.get("/api/me") as r:
            assert r.status == 401
            assert "deactivated" in (await r.json())["error"]["message"]


async def test_a_teacher_cannot_take_over_accounts_beyond_their_students(tmp_path: Path) -> None:
    """Provisioning refuses teachers' and admins' e-mails; a student who is also in another
    course gets a token for this course only; removing a member stops their token."""
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await _class(url, team)
        other = await team.accounts.create_user("o@school.edu", role="teacher")
        owner = Principal(other.id, other.email, other.name, "teacher", "system")
        course_b = await team.accounts.create_course(owner, "db-2026")
        [bob_b] = await team.accounts.add_students(course_b, [("bob@school.edu", "Bob")], actor="")
        assert bob_b.created is False and bob_b.token is not None
        students = f"/api/courses/{c['course']}/students"
        async with client(url, c["teacher"]) as teacher:
            for email in ("admin@localhost", "o@school.edu"):
                async with teacher.post(students, json={"roster": f"{email}\nnew@school.edu"}) as r:
                    assert r.status == 409, await r.text()
            assert await team.accounts.user_by_email("new@school.edu") is None  # all or nothing
            async with teacher.post(
                f"/api/courses/{c['course']}/members", json={"email": "o@school.edu"}
            ) as r:
                assert r.status == 403  # a teacher account is not added as a student
            async with teacher.post(students, json={"roster": "ann@school.edu"}) as r:
                [again] = await r.json()
                assert again["token"] is None  # she keeps her token: nothing new to leak
        # Bob's course-B token works in course B only
        async with client(url, bob_b.token) as bob:
            async with bob.get(f"/api/courses/{c['course']}") as r:
                assert r.status == 404
            async with bob.get("/api/courses") as r:
                assert [x["id"] for x in await r.json()] == [course_b.id]
            async with bob.post("/api/sessions", json={"course_id": c["course"]}) as r:
                assert r.status == 404
            async with bob.post("/api/me/password", json={"password": "long-enough-1"}) as r:
                assert r.status == 403
        member = f"/api/courses/{c['course']}/members/{c['ann_id']}"
        async with client(url, c["teacher"]) as t, t.delete(member) as r:
            assert r.status == 204
        async with client(url, c["ann"]) as ann, ann.get("/api/me") as r:
            assert r.status == 401


async def test_concurrent_wrong_passwords_cannot_pass_the_limit(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, login_attempts_per_minute=3)
    async with serve_team(settings) as (url, team):
        assert team.first_admin is not None
        body = {"email": team.first_admin.user.email, "password": "guess"}

        async def attempt() -> int:
            async with client(url) as s, s.post("/api/auth/login", json=body) as r:
                return r.status

        statuses = await asyncio.gather(*(attempt() for _ in range(20)))
        assert sorted(statuses).count(401) == 3, statuses
        assert statuses.count(429) == 17


async def test_changing_a_password_needs_the_current_one(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        admin = team.first_admin
        assert admin is not None
        issued = await team.accounts.issue_token(admin.user.id)
        async with client(url, issued.token) as a:
            async with a.post("/api/me/password", json={"password": "a-new-password"}) as r:
                assert r.status == 403
                assert "current_password" in (await r.json())["error"]["message"]
            async with a.post(
                "/api/me/password",
                json={"password": "a-new-password", "current_password": admin.password},
            ) as r:
                assert r.status == 204
        browser, _ = await _login(url, admin.user.email, "a-new-password")
        await browser.close()  # type: ignore[attr-defined]


async def test_an_expired_token_is_refused_with_what_to_do(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        user = await team.accounts.create_user("s@school.edu")
        issued = await team.accounts.issue_token(user.id, days=0.00001)  # under a second
        await asyncio.sleep(1.0)
        async with client(url, issued.token) as s, s.get("/api/me") as r:
            assert r.status == 401
            assert "expired" in (await r.json())["error"]["message"]
        async with client(url, "agt_" + "x" * 43) as s, s.get("/api/me") as r:
            assert r.status == 401
        async with client(url, "not-a-token") as s, s.get("/api/me") as r:
            assert r.status == 401
            assert "agt_" in (await r.json())["error"]["message"]
        async with client(url) as s, s.get("/api/me") as r:
            assert r.status == 401


async def test_browser_logins_need_the_csrf_value_for_changes(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        admin = team.first_admin
        assert admin is not None
        browser, csrf = await _login(url, admin.user.email, admin.password)
        async with browser:
            async with browser.get("/api/me") as r:
                assert r.status == 200
                assert (await r.json())["csrf_token"] == csrf
            async with browser.post("/api/me/tokens", json={"name": "x"}) as r:
                assert r.status == 403
                assert "X-CSRF-Token" in (await r.json())["error"]["message"]
            async with browser.post(
                "/api/me/tokens", json={"name": "x"}, headers={"X-CSRF-Token": "wrong"}
            ) as r:
                assert r.status == 403
            async with browser.post(
                "/api/me/tokens", json={"name": "x"}, headers={"X-CSRF-Token": csrf}
            ) as r:
                assert r.status == 201
            async with browser.post("/api/auth/logout", headers={"X-CSRF-Token": csrf}) as r:
                assert r.status == 204
            async with browser.get("/api/me") as r:
                assert r.status == 401


async def test_a_student_logs_in_with_the_token_their_teacher_handed_out(
    tmp_path: Path,
) -> None:
    """E-mail and token log a browser in (the student has no password yet); another
    account's token, a revoked token, or both secrets at once do not."""
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await make_class(team, "http://127.0.0.1:9/v1")
        async with client(url) as s:
            login = {"email": "ann@school.edu", "token": c.ann}
            async with s.post("/api/auth/login", json=login) as r:
                assert r.status == 200, await r.text()
                me = await r.json()
                assert me["email"] == "ann@school.edu" and me["csrf_token"]
            async with s.get("/api/me") as r:  # the cookie works
                assert r.status == 200
            wrong = {"email": "bob@school.edu", "token": c.ann}
            async with s.post("/api/auth/login", json=wrong) as r:
                assert r.status == 401
                assert "wrong e-mail or token" in (await r.json())["error"]["message"]
            both = {"email": "ann@school.edu", "token": c.ann, "password": "x" * 8}
            async with s.post("/api/auth/login", json=both) as r:
                assert r.status == 400
                assert "either" in (await r.json())["error"]["message"]
        token_id = (await team.accounts.principal_for_token(c.bob)).token_id
        bob = await team.accounts.user_by_email("bob@school.edu")
        assert bob is not None and token_id is not None
        await team.accounts.revoke_token(bob.id, token_id, actor=bob.id)
        async with client(url) as s:
            revoked = {"email": "bob@school.edu", "token": c.bob}
            async with s.post("/api/auth/login", json=revoked) as r:
                assert r.status == 401
        logins = await team.audit.search(course_id=None, kind="login")
        assert [r.data["with"] for r in logins] == ["token"]


async def test_failed_logins_are_rate_limited_per_account(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, login_attempts_per_minute=3)
    async with serve_team(settings) as (url, team):
        assert team.first_admin is not None
        email = team.first_admin.user.email
        async with client(url) as s:
            statuses = []
            for _ in range(5):
                async with s.post(
                    "/api/auth/login", json={"email": email, "password": "guess"}
                ) as r:
                    statuses.append(r.status)
                    retry = r.headers.get("Retry-After")
            assert statuses[:3] == [401, 401, 401]
            assert statuses[3:] == [429, 429]
            assert retry is not None and 1 <= int(retry) <= 61
            # the right password is refused too while the limit holds
            async with s.post(
                "/api/auth/login", json={"email": email, "password": team.first_admin.password}
            ) as r:
                assert r.status == 429
        failures = await team.audit.search(course_id=None, kind="login_failed")
        assert len(failures) == 3


async def test_a_course_key_is_write_only(tmp_path: Path) -> None:
    key = "sk-test-THIS-KEY-MUST-NOT-LEAK-0123456789"
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        c = await _class(url, team)
        async with client(url, c["teacher"]) as teacher:
            async with teacher.patch(
                f"/api/courses/{c['course']}",
                json={"model": "openai:gpt-4o-mini", "model_api_key": key},
            ) as r:
                text = await r.text()
                assert r.status == 200, text
                assert key not in text
                assert (await r.json())["model_api_key_set"] is True
            async with teacher.get(f"/api/courses/{c['course']}") as r:
                assert key not in await r.text()
            async with teacher.get(f"/api/courses/{c['course']}/audit") as r:
                audit = await r.text()
                assert key not in audit
                assert "model_api_key" in audit  # which field changed is recorded
        course_path = f"/api/courses/{c['course']}"
        async with client(url, c["ann"]) as ann, ann.patch(course_path, json={"title": "x"}) as r:
            assert r.status == 403
        async with client(url, c["teacher"]) as teacher:
            refused = (
                ("nosuch:model-1", "unknown provider"),
                ("openai:", "names no"),
                ("local:giant-70b", "no embedded model"),
            )
            for model, says in refused:
                async with teacher.patch(course_path, json={"model": model}) as r:
                    problem = (await r.json())["error"]["message"]
                    assert r.status == 400 and says in problem, problem
            async with teacher.get(course_path) as r:
                assert (await r.json())["model"] == "openai:gpt-4o-mini"  # left as it was


async def test_the_database_file_is_the_owners_only(tmp_path: Path) -> None:
    """It holds password and token hashes and the encrypted provider keys."""
    async with serve_team(sqlite_settings(tmp_path)) as (_url, team):
        assert team.settings.database.endswith("team.db")
        modes = await asyncio.to_thread(
            lambda: {path.name: path.stat().st_mode for path in tmp_path.rglob("team.db*")}
        )
        assert "team.db" in modes and "team.db-wal" in modes, modes
        for name, mode in modes.items():
            assert mode & 0o077 == 0, f"{name}: {oct(mode)}"


async def test_bad_bodies_get_a_clear_4xx(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path, max_body_bytes=4096)) as (url, team):
        c = await _class(url, team)
        async with client(url, c["teacher"]) as teacher:
            path = f"/api/courses/{c['course']}/students"
            async with teacher.post(
                path, data=b"{not json", headers={"Content-Type": "application/json"}
            ) as r:
                assert r.status == 422
                assert "invalid" in (await r.json())["error"]["message"]
            async with teacher.post(path, json={"roster": "x@y.z", "extra": 1}) as r:
                assert r.status == 422
                assert "extra" in (await r.json())["error"]["message"]
            async with teacher.post(path, json={"roster": "not-an-email"}) as r:
                assert r.status == 400
                assert "roster line 1" in (await r.json())["error"]["message"]
            async with teacher.post(path, json={"roster": "a@b.c," * 2000}) as r:
                assert r.status == 413
                assert "4096" in (await r.json())["error"]["message"]
        async with client(url, c["ann"]) as ann, ann.get("/api/me") as r:
            assert r.status == 200  # the server keeps serving


def test_rosters_are_read_from_csv_or_plain_lists() -> None:
    assert parse_roster("email,name\nA@X.org,Ann\n\nb@x.org\n") == [
        ("a@x.org", "Ann"),
        ("b@x.org", "b"),
    ]
    assert parse_roster("a@x.org; b@x.org\nc@x.org") == [
        ("a@x.org", "a"),
        ("b@x.org", "b"),
        ("c@x.org", "c"),
    ]
    with pytest.raises(BadRequest, match="roster line 2"):
        parse_roster("a@x.org\nnope\n")
    with pytest.raises(BadRequest, match="empty"):
        parse_roster("email\n")


def test_settings_come_from_a_toml_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "team.toml"
    config.write_text('port = 9000\nmodel = "deepseek:deepseek-chat"\nhost = "0.0.0.0"\n')
    monkeypatch.setenv("AGENTICA_TEAM_PORT", "9100")
    settings = TeamSettings.load(config)
    assert (settings.port, settings.model, settings.host) == (
        9100,
        "deepseek:deepseek-chat",
        "0.0.0.0",
    )
    assert TeamSettings.load(config, port=9200).port == 9200
    assert (
        TeamSettings(database_url="postgresql://u@h/db").database == "postgresql+asyncpg://u@h/db"
    )
    with pytest.raises(ValueError, match="must start with sqlite:// or postgresql://"):
        TeamSettings(database_url="mysql://x")
    with pytest.raises(BadRequest, match="does not exist"):
        TeamSettings.load(tmp_path / "missing.toml")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AGENTICA_TEAM_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "AGENTICA_TEAM_DATA_DIR": str(tmp_path),
    }
    return subprocess.run(
        [sys.executable, "-m", "agentica.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_command_line_provisions_a_class_and_verifies_the_audit(tmp_path: Path) -> None:
    done = _cli(tmp_path, "team", "add-user", "t@school.edu", "--role", "teacher")
    assert done.returncode == 0, done.stderr
    assert "password:" in done.stdout
    assert (
        _cli(tmp_path, "team", "create-course", "web", "--teacher", "t@school.edu").returncode == 0
    )
    roster = tmp_path / "students.csv"
    roster.write_text("email,name\nann@school.edu,Ann\nbob@school.edu,Bob\n")
    out = tmp_path / "tokens.csv"
    done = _cli(tmp_path, "team", "add-students", "web", str(roster), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("agentica connect --server") == 2
    with out.open() as written:
        rows = list(csv.DictReader(written))
    assert [r["email"] for r in rows] == ["ann@school.edu", "bob@school.edu"]
    assert all(r["token"].startswith("agt_") and r["token"] in r["connect"] for r in rows)
    assert out.stat().st_mode & 0o077 == 0
    again = _cli(tmp_path, "team", "add-students", "web", str(roster))
    assert "0 new accounts" in again.stderr
    usage = _cli(tmp_path, "team", "usage", "--course", "web")
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.split()[:8] == [
        "day",
        "student",
        "source",
        "requests",
        "tokens",
        "cached",
        "saved",
        "USD",
    ]
    verify = _cli(tmp_path, "team", "audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "ok" in verify.stdout
    with sqlite3.connect(tmp_path / "cli.db") as db:
        db.execute("UPDATE team_audit SET kind = 'nothing' WHERE seq = 2 AND chain != ''")
    verify = _cli(tmp_path, "team", "audit", "verify")
    assert verify.returncode == 1
    assert "DAMAGED at seq 2" in verify.stdout
    bad = _cli(tmp_path, "team", "add-students", "nope", str(roster))
    assert bad.returncode == 1
    assert "no course named 'nope'" in bad.stderr


def test_every_setting_is_in_the_documented_table() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "team.md").read_text()
    for name, field in TeamSettings.model_fields.items():
        row = f"| `{name}` | `AGENTICA_TEAM_{name.upper()}` |"
        assert row in doc, f"docs/team.md has no row for the setting {name}"
        assert str(field.description) in doc, f"the description of {name} is out of date"


def test_every_route_is_documented_with_its_errors(tmp_path: Path) -> None:
    from agentica_team.app import create_app

    schema = create_app(sqlite_settings(tmp_path)).openapi()
    problems = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not (operation.get("description") or "").strip():
                problems.append(f"{method.upper()} {path}: no description")
            for status in ("401", "422"):
                documented = operation["responses"].get(status, {})
                ref = str(documented.get("content", {}).get("application/json", {}).get("schema"))
                if "ErrorOut" not in ref:
                    problems.append(f"{method.upper()} {path}: {status} is not an ErrorOut")
    assert not problems, "\n".join(problems)


async def test_a_change_made_by_another_worker_counts_within_the_cache_ttl(tmp_path: Path) -> None:
    """Each process keeps a token's principal and a caller's courses ``cache_ttl`` seconds: a
    change made in the process counts at once, one made by another worker (here a second
    ``Accounts`` on the same database) once that time has passed."""
    from agentica_team.accounts import Accounts
    from agentica_team.audit import Audit
    from agentica_team.db import Database

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'team.db'}")
    await db.upgrade(framework=False)
    audit = Audit(db)
    here, there = Accounts(db, audit), Accounts(db, audit, cache_ttl=0.2)
    try:
        teacher = await here.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        first = await here.create_course(owner, "first")
        student = await here.create_user("s@school.edu")
        token = (await here.issue_token(student.id)).token
        await here.add_member(first.id, student.id, "student", actor=teacher.id)
        me = await there.principal_for_token(token)
        assert [c.name for c in await there.courses_of(me)] == ["first"]

        second = await here.create_course(owner, "second")
        await here.add_member(second.id, student.id, "student", actor=teacher.id)
        assert [c.name for c in await here.courses_of(me)] == ["first", "second"]  # at once
        await asyncio.sleep(0.3)
        assert [c.name for c in await there.courses_of(me)] == ["first", "second"]

        assert await there.principal_for_token(token) == me  # kept by the other worker
        await here.set_active(student.id, False, actor=teacher.id)
        with pytest.raises(Unauthorized):
            await here.principal_for_token(token)  # at once
        await asyncio.sleep(0.3)
        with pytest.raises(Unauthorized):
            await there.principal_for_token(token)
    finally:
        await audit.aclose()
        await db.aclose()


async def test_the_login_limit_holds_across_a_minutes_turn(tmp_path: Path) -> None:
    """Three failures at 12:00:59.9 and a fourth at 12:01:00.1: refused, as over any 60 s
    (clock minutes would give the burst a second allowance)."""
    from agentica_team.errors import RateLimited
    from agentica_team.service import Team

    team = await Team.open(sqlite_settings(tmp_path, login_attempts_per_minute=3))
    try:
        assert team.first_admin is not None
        email = team.first_admin.user.email
        now = [1_700_000_000.0 // 60 * 60 + 59.9]
        team.accounts.clock = lambda: now[0]
        for _ in range(3):
            with pytest.raises(Unauthorized):
                await team.accounts.login(email, "guess", address="10.0.0.1")
        now[0] += 0.2  # the next clock minute
        with pytest.raises(RateLimited):
            await team.accounts.login(email, "guess", address="10.0.0.1")
        now[0] += 60  # a minute later the earlier failures are out of the last 60 s
        with pytest.raises(Unauthorized):
            await team.accounts.login(email, "guess", address="10.0.0.1")
    finally:
        await team.aclose()


async def test_the_server_says_where_it_is_and_new_tokens_come_with_a_connect_line(
    tmp_path: Path,
) -> None:
    """``GET /api/server`` for any caller (a student's course token too; anonymous: 401); a
    personal token and a re-issued course token each come with their ``agentica connect``
    line."""
    from importlib.metadata import version

    settings = sqlite_settings(
        tmp_path, public_url="https://agents.school.edu/", agent_runtime="batch"
    )
    async with serve_team(settings) as (url, team):
        c = await _class(url, team)
        async with client(url, c["ann"]) as ann, ann.get("/api/server") as r:
            assert r.status == 200, await r.text()
            assert await r.json() == {
                "base_url": "https://agents.school.edu",
                "gateway_url": "https://agents.school.edu/v1",
                "version": version("agentica-team"),
                "runtime": "batch",
                "runtimes": ["serial", "batch", "lanes"],
            }
        async with client(url) as anon, anon.get("/api/server") as r:
            assert r.status == 401
        async with client(url, c["teacher"]) as teacher:
            async with teacher.post("/api/me/tokens", json={"name": "laptop"}) as r:
                personal = await r.json()
            path = f"/api/courses/{c['course']}/students/{c['ann_id']}/token"
            async with teacher.post(path) as r:
                reissued = await r.json()
    for issued in (personal, reissued):
        assert issued["connect"] == (
            f"agentica connect --server https://agents.school.edu --token {issued['token']} "
            "--workspace ."
        )
