"""The web UI: ``uv run python benchmarks/team_web.py [--quick]`` (after ``make web``).

1. First load: the JavaScript and CSS the login page loads (gzipped, as served over a network
   that compresses), the whole build, and the time for headless Chromium (Debian's) to show the
   login form from an empty cache, p50 over several loads.
2. Time to first streamed token, in the browser vs over the API: a student's message to their
   agent (``agentica serve`` in a process of its own, on SQLite; the course's model a scripted
   server in this process that streams its answer at once). API: from ``POST .../messages`` to
   the first ``text_delta`` on the session's event stream (SSE). Browser: from pressing Enter in
   the chat page to the first streamed word on screen. Both p50/p95 over the same number of
   messages, alternating.

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.testing import FakeOpenAIServer  # noqa: E402
from agentica_team.principal import Principal  # noqa: E402
from agentica_team.service import Team  # noqa: E402
from agentica_team.settings import TeamSettings  # noqa: E402
from agentica_team.webui import BUILT  # noqa: E402
from benchmarks.team_server import serve_process  # noqa: E402
from tests.web.browser import launch, why_no_browser  # noqa: E402

PASSWORD = "bench-password-1"


def _kb(data: bytes) -> float:
    return len(gzip.compress(data, 9)) / 1024


def first_load_sizes() -> dict[str, float]:
    """KB gzipped: what index.html loads (entry script, its preloads, CSS), and every chunk."""
    index = (BUILT / "index.html").read_text()
    loaded = re.findall(r'(?:src|href)="/(assets/[^"]+)"', index)
    js = [BUILT / p for p in loaded if p.endswith(".js")]
    css = [BUILT / p for p in loaded if p.endswith(".css")]
    every = list((BUILT / "assets").glob("*.js"))
    return {
        "first_js": sum(_kb(p.read_bytes()) for p in js),
        "first_css": sum(_kb(p.read_bytes()) for p in css),
        "all_js": sum(_kb(p.read_bytes()) for p in every),
        "chunks": len(every),
    }


def model(body: dict[str, Any]) -> str:
    """Streams its answer at once; the first word is the marker the clients wait for."""
    return "alpha " + " ".join(f"word{n}" for n in range(40))


async def provision(settings: TeamSettings, model_url: str) -> tuple[str, str]:
    """A course on the scripted model and a student with a password; the student's token and
    course id."""
    team = await Team.open(settings)
    try:
        accounts = team.accounts
        teacher = await accounts.create_user("t@bench.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "bench")
        await accounts.update_course(
            course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
        )
        student = await accounts.create_user("ann@bench.edu", role="student", password=PASSWORD)
        await accounts.add_member(course.id, student.id, "student", actor=teacher.id)
        return (await accounts.issue_token(student.id)).token, course.id
    finally:
        await team.aclose()


async def api_first_token(http: aiohttp.ClientSession, session_id: str, after: int) -> float:
    """Seconds from posting a message to its first text_delta on the event stream."""
    url = f"/api/sessions/{session_id}/events"
    async with http.get(url, params={"after": after}) as stream:
        started = time.perf_counter()
        async with http.post(f"/api/sessions/{session_id}/messages", json={"text": "go"}) as r:
            assert r.status == 202, await r.text()
        async for line in stream.content:
            if line.startswith(b"data:") and b'"text_delta"' in line:
                return time.perf_counter() - started
    raise AssertionError("the stream ended before a token")


async def wait_idle(http: aiohttp.ClientSession, session_id: str) -> int:
    """Wait until the session's agent is idle; its last seq."""
    while True:
        async with http.get(f"/api/sessions/{session_id}") as r:
            session = await r.json()
        if not session["active"]:
            return int(session["last_seq"])
        await asyncio.sleep(0.05)


_WATCH = """() => {
  const count = () => document.body.textContent.split("alpha").length;
  const before = count();
  window.__firstToken = new Promise((resolve) => {
    let sent = 0;
    document.addEventListener("keydown", () => { sent = sent || performance.now(); },
                              { capture: true, once: true });
    const observer = new MutationObserver(() => {
      if (sent && count() > before) {
        observer.disconnect();
        resolve((performance.now() - sent) / 1000);
      }
    });
    observer.observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}"""


async def browser_first_token(page: Any) -> float:
    """Seconds from pressing Enter in the composer to the first streamed word on screen,
    timed in the page (from the keydown to the DOM change that shows it)."""
    box = page.get_by_label("Message", exact=True)
    await box.fill("go")
    await page.evaluate(_WATCH)
    await box.press("Enter")
    return float(await page.evaluate("() => window.__firstToken"))


async def first_loads(browser: Any, url: str, loads: int) -> list[float]:
    """Seconds from navigation to the login form, each from an empty cache."""
    times = []
    for _ in range(loads):
        context = await browser.new_context()
        page = await context.new_page()
        started = time.perf_counter()
        await page.goto(f"{url}/login")
        await page.get_by_role("button", name="Log in").wait_for()
        times.append(time.perf_counter() - started)
        await context.close()
    return times


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(quick: bool) -> int:
    reason = why_no_browser()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 1
    from playwright.async_api import async_playwright

    sizes = first_load_sizes()
    rounds = 10 if quick else 40
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = TeamSettings(database_url=f"sqlite:///{home / 'team.db'}", data_dir=home)
        async with FakeOpenAIServer(model, record=False) as upstream:
            token, course = await asyncio.to_thread(
                asyncio.run, provision(settings, upstream.base_url)
            )
            async with (
                serve_process(settings.database, home, token, "/api/me") as (url, _),
                async_playwright() as playwright,
                aiohttp.ClientSession(url, headers={"Authorization": f"Bearer {token}"}) as http,
            ):
                browser = await launch(playwright)
                loads = await first_loads(browser, url, 5 if quick else 15)
                sessions = []
                for title in ("api", "browser"):
                    async with http.post(
                        "/api/sessions", json={"course_id": course, "title": title}
                    ) as r:
                        sessions.append((await r.json())["id"])
                page = await (await browser.new_context()).new_page()
                await page.goto(f"{url}/login")
                await page.get_by_label("E-mail").fill("ann@bench.edu")
                await page.get_by_label("Password").fill(PASSWORD)
                await page.get_by_role("button", name="Log in").click()
                await page.wait_for_url(re.compile(r".*/sessions$"))
                await page.goto(f"{url}/sessions/{sessions[1]}")
                await page.get_by_label("Message", exact=True).wait_for()
                api_times, browser_times, after = [], [], 0
                for _ in range(rounds):
                    api_times.append(await api_first_token(http, sessions[0], after))
                    after = await wait_idle(http, sessions[0])
                    browser_times.append(await browser_first_token(page))
                    await wait_idle(http, sessions[1])
                await browser.close()

    ms = 1000
    print("| first load | value |\n|---|---|")
    print(f"| JavaScript the login page loads (gzip) | {sizes['first_js']:.1f} KB |")
    print(f"| CSS (gzip) | {sizes['first_css']:.1f} KB |")
    chunks = f"every JavaScript chunk (gzip, {sizes['chunks']:.0f} chunks)"
    print(f"| {chunks} | {sizes['all_js']:.1f} KB |")
    load = statistics.median(loads) * ms
    print(f"| navigation to the login form, empty cache, p50 | {load:.0f} ms |")
    print(f"\n| first streamed token ({rounds} messages each) | p50 | p95 |\n|---|---|---|")
    rows = (("API (POST, then SSE)", api_times), ("browser (Enter to screen)", browser_times))
    for name, times in rows:
        p50, p95 = statistics.median(times) * ms, _p(times, 0.95) * ms
        print(f"| {name} | {p50:.0f} ms | {p95:.0f} ms |")
    ratio = statistics.median(browser_times) / statistics.median(api_times)
    print(f"\nbrowser / API (p50): {ratio:.2f}")
    print(json.dumps({"sizes": sizes, "loads": loads, "api": api_times, "browser": browser_times}),
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
