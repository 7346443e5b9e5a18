"""Debian's Chromium driven by Playwright for the web UI's end-to-end tests (never a downloaded
browser): ``why_no_browser`` says why a test must skip, ``launch`` starts Chromium headless,
``serious_violations`` runs axe-core on a page, ``screenshot`` saves a page into ``docs/img``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agentica_team.webui import BUILT

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "web" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "img"
# Chromium's own background traffic (updates, sync, safe browsing) is refused on a closed network
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def why_no_browser() -> str | None:
    """Why the end-to-end tests cannot run here, or ``None``."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (make install)"
    if chromium() is None:
        return "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
    if not (BUILT / "index.html").is_file():
        return "the web UI is not built (make web; make test builds it first)"
    if not AXE.is_file():
        return "axe-core is not installed (make web runs npm ci)"
    return None


async def launch(playwright: Any) -> Any:
    return await playwright.chromium.launch(executable_path=chromium(), args=FLAGS)


async def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on ``page`` as it is now (WCAG 2.x A/AA)."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE.read_text())
    found: list[dict[str, Any]] = await page.evaluate(
        "axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', "
        "'best-practice']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, "
        "help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes']}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


async def screenshot(page: Any, name: str) -> Path:
    """Save the page as ``docs/img/web-NAME.png`` (the README and the guide show them)."""
    path = SHOTS / f"web-{name}.png"
    await page.screenshot(path=str(path), full_page=False)
    return path
