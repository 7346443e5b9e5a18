"""The web UI end to end in headless Chromium (Debian's, driven by Playwright) against a real
``agentica serve`` process on SQLite, the course's model a scripted server in this process.

One scenario, run once: a teacher provisions a student from the roster page; the student logs in
with the token it showed, chats (the answer streams, the tool call shows as a card), stops a
running operation in a lanes session, and is refused once the teacher's budget is used up; the
teacher sees the usage and the audit records, and the chain verifies. Stopping the operation and
the refused message are done with the keyboard alone. axe-core checks every page
(no serious or critical violation), in English and in Chinese, and each main page is saved as a
screenshot into ``docs/img`` for the README and the guide.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentica.testing import FakeOpenAIServer, call, tool_calls
from agentica_team.principal import Principal
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from tests.team.test_durability import Server
from tests.web.browser import launch, screenshot, serious_violations, why_no_browser

pytestmark = [
    pytest.mark.skipif(why_no_browser() is not None, reason=str(why_no_browser())),
    pytest.mark.slow,
    pytest.mark.timeout(300),
]

TEACHER, PASSWORD = "teacher@school.edu", "teacher-password-1"
STUDENT = "ann@school.edu"
SANDBOX = shutil.which("bwrap") is not None


def model(body: dict[str, Any]) -> Any:
    """The course's model: the lanes' router and interrupter, a lane that runs a long command
    until it is stopped, and a chat that writes a file and then says so."""
    messages = body["messages"]
    system, last = str(messages[0].get("content", "")), messages[-1]
    text = str(last.get("content", ""))
    if "route a student's messages" in system:
        return '{"to": "new_lane", "lane": "", "intent": "run the tests", "answer": ""}'
    if "was interrupted" in system:
        return '{"intent": "", "cancel": [], "terminate": ""}'
    tools = {t["function"]["name"] for t in body.get("tools", [])}
    if "start_command" in tools:
        if last["role"] == "user" and "did not finish" in text:
            return tool_calls(call("lane_done", summary="stopped as asked"))
        if last["role"] == "tool":
            return "The tests are running."
        return tool_calls(call("start_command", command="sleep 120"))
    if last["role"] == "tool":
        return "I wrote /hello.py: it prints a greeting."
    return tool_calls(call("write_file", path="/hello.py", content="print('hello')\n"))


async def _provision(settings: TeamSettings, model_url: str) -> str:
    """A teacher with a password and a course on the scripted model; the teacher's token."""
    team = await Team.open(settings)
    try:
        accounts = team.accounts
        teacher = await accounts.create_user(TEACHER, name="Ms Lin", role="teacher",
                                             password=PASSWORD)  # fmt: skip
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "web-2026", title="Web programming")
        await accounts.update_course(
            course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
        )
        return (await accounts.issue_token(teacher.id)).token
    finally:
        await team.aclose()


class Pages:
    """Checks every page it is shown (axe-core) and keeps what was wrong."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    async def check(self, page: Any, name: str, *, shot: bool = True) -> None:
        await page.wait_for_load_state("networkidle")
        for violation in await serious_violations(page):
            self.problems.append(f"{name}: {violation}")
        if shot:
            await screenshot(page, name)


async def _login(page: Any, url: str, email: str, secret: str, *, token: bool = False) -> None:
    await page.goto(f"{url}/login")
    await page.get_by_label("E-mail").fill(email)
    if token:
        await page.get_by_label("I have a token").check()
        await page.get_by_label("Token", exact=True).fill(secret)
    else:
        await page.get_by_label("Password").fill(secret)
    await page.get_by_role("button", name="Log in").click()


async def _tab_to(page: Any, target: Any, *, limit: int = 80) -> None:
    """Press Tab until ``target`` has the focus (the keyboard's way there), or fail."""
    for _ in range(limit):
        await page.keyboard.press("Tab")
        if await target.evaluate("e => e === document.activeElement"):
            return
    raise AssertionError(f"{limit} presses of Tab never reached {target}")


async def test_a_class_through_the_browser(tmp_path: Path) -> None:
    from playwright.async_api import async_playwright, expect

    settings = TeamSettings(
        database_url=f"sqlite:///{tmp_path / 'team.db'}", data_dir=tmp_path / "data"
    )
    pages = Pages()
    async with FakeOpenAIServer(model, record=False) as upstream:
        token = await asyncio.to_thread(asyncio.run, _provision(settings, upstream.base_url))
        server = Server(tmp_path, settings)
        server.env["AGENTICA_TEAM_SERVER_COMMANDS"] = "true" if SANDBOX else "false"
        await server.start(token)
        try:
            async with async_playwright() as playwright:
                browser = await launch(playwright)
                teacher_context = await browser.new_context(locale="en-US")
                student_context = await browser.new_context(locale="en-US")
                teacher = await teacher_context.new_page()
                student = await student_context.new_page()
                await teacher.goto(f"{server.url}/login")
                await pages.check(teacher, "login-en")
                await _scenario(server.url, teacher, student, pages, expect)
                await browser.close()
        finally:
            await server.stop()
    assert not pages.problems, "\n".join(pages.problems)


async def _scenario(url: str, teacher: Any, student: Any, pages: Pages, expect: Any) -> None:
    # the teacher provisions a student from the roster
    await _login(teacher, url, TEACHER, PASSWORD)
    await expect(teacher.get_by_role("heading", name="Teaching", exact=True)).to_be_visible()
    await teacher.get_by_role("link", name="Web programming").click()
    await teacher.get_by_role("link", name="Roster").click()
    await teacher.get_by_label("Students' e-mails or CSV").fill(f"{STUDENT},Ann")
    await teacher.get_by_role("button", name="Add students").click()
    await expect(teacher.get_by_role("heading", name="Students added")).to_be_visible()
    shown = await teacher.locator("main").inner_text()
    found = re.search(r"agt_[A-Za-z0-9_-]{20,}", shown)
    assert found, f"no token on the roster page: {shown[:500]}"
    await pages.check(teacher, "teacher-roster-en")

    # the student logs in with it and chats: the tool call and the streamed answer show
    await _login(student, url, STUDENT, found.group(0), token=True)
    await expect(student.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
    await student.get_by_label("Title (optional)").fill("Hello")
    await student.get_by_role("button", name="Create session").click()
    box = student.get_by_label("Message", exact=True)
    await box.fill("write hello.py")
    await box.press("Enter")
    await expect(student.get_by_text("I wrote /hello.py")).to_be_visible(timeout=30_000)
    await expect(student.get_by_text("write_file").first).to_be_visible()
    files = student.get_by_role("region", name="Files")
    await expect(files.get_by_text("hello.py")).to_be_visible()  # where the agent wrote it
    await pages.check(student, "chat-en")

    # a lanes session: the running operation is stopped from its card
    if SANDBOX:
        await student.goto(f"{url}/sessions")
        await student.get_by_label("How the agent works").select_option("lanes")
        await student.get_by_label("Title (optional)").fill("Tests")
        await student.get_by_role("button", name="Create session").click()
        box = student.get_by_label("Message", exact=True)
        await box.fill("run the tests")
        await box.press("Enter")
        lane = student.get_by_role("list", name="Operations of lane L1")
        stop = lane.get_by_role("button", name="Stop operation op1")
        await expect(stop).to_be_visible(timeout=30_000)
        await pages.check(student, "lanes-en")
        await _tab_to(student, stop)  # the keyboard alone stops it
        await student.keyboard.press("Enter")
        every_stop = student.get_by_role("button", name="Stop operation op1")
        await expect(every_stop).to_have_count(0, timeout=30_000)
        await expect(student.get_by_text("stopped as asked").first).to_be_visible(timeout=30_000)

    # the teacher sets a budget the student has used up; the next message is refused
    await teacher.get_by_role("link", name="Usage").click()
    form = teacher.get_by_role("form", name="Set a budget")
    await form.get_by_label("Applies to").select_option(label=STUDENT)
    await form.get_by_label("Max tokens").fill("1")
    await teacher.get_by_role("button", name="Save budget").click()
    await expect(teacher.get_by_text("Budget saved")).to_be_visible()
    # (with the keyboard alone: Tab to the session, Enter, type, Enter)
    await student.goto(f"{url}/sessions")
    await _tab_to(student, student.get_by_role("link", name="Hello"))
    await student.keyboard.press("Enter")
    box = student.get_by_label("Message", exact=True)
    await _tab_to(student, box)
    await student.keyboard.type("and a test for it")
    await student.keyboard.press("Enter")
    await expect(student.get_by_text("Budget used up").first).to_be_visible(timeout=30_000)

    # the teacher sees the usage and the audit, and the chain verifies
    await teacher.reload()
    await expect(teacher.get_by_role("table", name="Usage per student")).to_contain_text(STUDENT)
    await pages.check(teacher, "teacher-usage-en")
    await teacher.get_by_role("link", name="Activity").click()
    await expect(teacher.get_by_text("Hello").first).to_be_visible()
    await pages.check(teacher, "teacher-activity-en")
    await teacher.get_by_role("link", name="Audit").click()
    await expect(teacher.get_by_text("Intact")).to_be_visible()
    await expect(teacher.get_by_role("cell", name="instruction").first).to_be_visible()
    await pages.check(teacher, "teacher-audit-en")
    await teacher.get_by_role("link", name="Settings").click()
    await pages.check(teacher, "teacher-settings-en")

    for path, name in (("/sessions", "sessions"), ("/executors", "executors"),
                       ("/account", "account")):  # fmt: skip
        await student.goto(url + path)
        await pages.check(student, f"{name}-en")
    await _in_chinese(url, teacher, student, pages, expect)


async def _in_chinese(url: str, teacher: Any, student: Any, pages: Pages, expect: Any) -> None:
    """Switch the language in the header; the pages again, in Chinese."""
    await student.get_by_label("Language").select_option("zh")
    await expect(student.get_by_role("link", name="会话")).to_be_visible()
    await pages.check(student, "account-zh")
    await student.goto(f"{url}/sessions")
    await pages.check(student, "sessions-zh")
    await student.get_by_role("link", name="Hello").click()
    await expect(student.get_by_text("I wrote /hello.py")).to_be_visible()
    await pages.check(student, "chat-zh")
    await teacher.get_by_label("Language").select_option("zh")
    tabs = (("名单", "roster"), ("用量", "usage"), ("动态", "activity"), ("审计", "audit"),
            ("设置", "settings"))  # fmt: skip
    for tab, name in tabs:
        await teacher.get_by_role("link", name=tab, exact=True).click()
        await pages.check(teacher, f"teacher-{name}-zh")
