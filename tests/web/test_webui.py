"""The web UI's files as ``agentica serve`` serves them (``agentica_team.webui``), over real HTTP
on a stand-in build: the app for any page path, API paths that stay JSON, caching, the security
headers, and no way out of the folder by ``..``, encoded slashes or a symlink."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import pytest

from tests.team.server import serve_team, sqlite_settings

INDEX = "<!doctype html><title>agentica</title><div id=root></div>"


def _build(folder: Path) -> Path:
    """A stand-in for ``make web``'s output, and a secret beside it."""
    (folder / "dist" / "assets").mkdir(parents=True)
    (folder / "dist" / "index.html").write_text(INDEX)
    (folder / "dist" / "assets" / "app-1a2b.js").write_text("console.log('app')")
    (folder / "secret.txt").write_text("the server's secret")
    return folder / "dist"


async def _get(url: str, path: str) -> tuple[int, dict[str, str], str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(url + path, allow_redirects=False) as response,
    ):
        return response.status, dict(response.headers), await response.text()


@pytest.fixture
async def served(tmp_path: Path) -> tuple[str, Path]:
    dist = await asyncio.to_thread(_build, tmp_path / "web")
    settings = sqlite_settings(tmp_path / "server", web_dir=dist)
    async with serve_team(settings) as (url, _):
        yield url, dist


async def test_every_page_path_gets_the_app_and_assets_are_cached(
    served: tuple[str, Path],
) -> None:
    url, _ = served
    for path in ("/", "/login", "/sessions/abc", "/teach/c1/audit"):
        status, headers, text = await _get(url, path)
        assert (status, text) == (200, INDEX), path
        assert headers["Cache-Control"] == "no-cache"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, text = await _get(url, "/assets/app-1a2b.js")
    assert (status, text) == (200, "console.log('app')")
    assert "immutable" in headers["Cache-Control"]


async def test_api_paths_and_missing_files_stay_json_404s(served: tuple[str, Path]) -> None:
    url, _ = served
    for path in (
        "/api/nothing",
        "/v1/nothing",
        "/assets/missing.js",
        "/favicon.ico",
    ):
        status, headers, text = await _get(url, path)
        assert status == 404, path
        assert headers["Content-Type"].startswith("application/json"), path
        assert '"error"' in text
    status, _, text = await _get(url, "/api/me")
    assert status == 401 and "log in" in text


async def test_nothing_outside_the_folder_is_served(served: tuple[str, Path]) -> None:
    url, dist = served
    await asyncio.to_thread(os.symlink, dist.parent / "secret.txt", dist / "assets" / "link.txt")
    for path in (
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/..%2fsecret.txt",
        "/assets%2f..%2f..%2fsecret.txt",
        "/%2e%2e/secret.txt",
        "/api/../../secret.txt",
        "/assets/link.txt",
    ):
        status, _, text = await _get(url, path)
        assert "secret" not in text, path
        assert status in (200, 404), path  # 200: the app itself, for a path it routes


async def test_an_unbuilt_ui_says_how_to_build_it(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path / "server", web_dir=tmp_path / "nothing")
    async with serve_team(settings) as (url, _):
        status, headers, text = await _get(url, "/")
        assert status == 404 and "make web" in text
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        status, _, text = await _get(url, "/api/nothing")
        assert status == 404 and '"error"' in text
