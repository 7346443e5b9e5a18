"""Web tools (agentica.deep.web): fetch_url and web_search against real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from agentica import Agent
from agentica.deep.web import (
    BraveProvider,
    SearchResult,
    SearxngProvider,
    TavilyProvider,
    Web,
    provider_from_env,
)
from agentica.errors import ToolError, UsageError
from agentica.messages import ToolMessage
from agentica.testing import ScriptedModel, call, tool_calls

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SECRET = "tvly-SECRET-0123456789abcdef"

ARTICLE = """<!doctype html>
<html><head><title>Rivers &amp; Lakes</title>
<style>body { color: red }</style><script>var tracking = "SCRIPT-NOISE";</script></head>
<body>
<header><a href="/">Home</a> SITE-BANNER</header>
<nav><ul><li><a href="/x">NAV-NOISE</a></li></ul></nav>
<main><article>
<h1>The Nile</h1>
<p>The <b>Nile</b> is long. See <a href="/wiki/Congo_River">the Congo</a>.</p>
<h2>Facts</h2>
<ul><li>Length: 6650 km</li><li>Countries: 11</li></ul>
<pre><code class="language-python">def length_km():
    return 6650
</code></pre>
<table><tr><th>River</th><th>km</th></tr><tr><td>Nile</td><td>6650</td></tr></table>
</article></main>
<footer>FOOTER-NOISE Copyright</footer>
</body></html>"""


class Site:
    """An aiohttp server on 127.0.0.1 whose routes a test defines; records the requests."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.requests: list[dict[str, Any]] = []
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_route("*", path, self._recording(handler))
        self.server = TestServer(app, host="127.0.0.1")

    def _recording(self, handler: Handler) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            self.requests.append({
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": await request.read(),
            })  # fmt: skip
            return await handler(request)

        return wrapped

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[dict[str, Handler]], Awaitable[Site]]]:
    sites: list[Site] = []

    async def start(routes: dict[str, Handler]) -> Site:
        site = Site(routes)
        await site.server.start_server()
        sites.append(site)
        return site

    yield start
    for site in sites:
        await site.server.close()


@pytest.fixture
async def tools() -> AsyncIterator[Callable[..., Web]]:
    """``make(**options)`` builds a ``Web`` (no provider from the environment) allowed to reach
    the test servers on 127.0.0.1 (refused by default); closed after."""
    made: list[Web] = []

    def make(**options: Any) -> Web:
        options.setdefault("env", {})
        options.setdefault("allow_hosts", ["127.0.0.1"])
        capability = Web(**options)
        made.append(capability)
        return capability

    yield make
    for capability in made:
        await capability.aclose()


def respond(body: bytes | str, content_type: str | None, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        data = body.encode() if isinstance(body, str) else body
        response = web.Response(body=data, status=status)
        if content_type is None:
            response.headers.pop("Content-Type", None)
            response.content_type = ""
        else:
            response.headers["Content-Type"] = content_type
        return response

    return handler


def redirect(to: str, status: int = 302) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": to})

    return handler


# ------------------------------------------------------------------------------ fetch_url


async def test_an_html_page_becomes_readable_markdown(serve: Any, tools: Any) -> None:
    site = await serve({"/nile": respond(ARTICLE, "text/html; charset=utf-8")})
    out = await tools().fetch(site.url("/nile"))
    assert out.startswith(f"URL: {site.url('/nile')}\nTitle: Rivers & Lakes\n")
    assert "# The Nile" in out and "## Facts" in out
    assert f"[the Congo]({site.url('/wiki/Congo_River')})" in out  # absolute, fetchable link
    assert "- Length: 6650 km\n- Countries: 11" in out
    assert "```python\ndef length_km():\n    return 6650\n```" in out
    assert "| River | km |" in out and "| Nile | 6650 |" in out
    for noise in ("SCRIPT-NOISE", "color: red", "NAV-NOISE", "SITE-BANNER", "FOOTER-NOISE"):
        assert noise not in out
    request = site.requests[0]
    assert request["method"] == "GET" and "text/html" in request["headers"]["Accept"]


async def test_text_types_are_returned_as_text_in_their_charset(serve: Any, tools: Any) -> None:
    site = await serve({
        "/notes.txt": respond("Café menu\n<b>not html</b>".encode("latin-1"),
                              "text/plain; charset=iso-8859-1"),
        "/data.json": respond('{"river": "Nile", "km": 6650}', "application/json"),
        "/unlabelled": respond(b"just some words", None),
    })  # fmt: skip
    web_tools = tools()
    text = await web_tools.fetch(site.url("/notes.txt"))
    assert text.endswith("\n\nCafé menu\n<b>not html</b>")  # decoded, not treated as HTML
    assert "Content-Type: text/plain" in text
    data = await web_tools.fetch(site.url("/data.json"))
    assert json.loads(data.split("\n\n", 1)[1]) == {"river": "Nile", "km": 6650}
    assert (await web_tools.fetch(site.url("/unlabelled"))).endswith("\n\njust some words")


async def test_binary_content_is_refused(serve: Any, tools: Any) -> None:
    site = await serve({
        "/cat.png": respond(b"\x89PNG\r\n\x1a\n" + b"\x00" * 5000, "image/png"),
        "/report.pdf": respond(b"%PDF-1.7 ...", "application/pdf"),
        "/blob": respond(b"\x00\x01\x02\x03" * 100, None),
    })  # fmt: skip
    web_tools = tools()
    for path, kind in (("/cat.png", "image/png"), ("/report.pdf", "application/pdf"),
                       ("/blob", "unlabelled binary")):  # fmt: skip
        with pytest.raises(ToolError) as info:
            await web_tools.fetch(site.url(path))
        assert kind in str(info.value) and "reads HTML and text pages only" in str(info.value)


async def test_the_download_stops_at_max_bytes(serve: Any, tools: Any) -> None:
    sent = 0
    stopped = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        try:
            while True:  # never ends on its own: only the client closing stops it
                await response.write(b"a" * 65536)
                sent += 65536
        finally:
            stopped.set()

    site = await serve({"/huge": endless})
    out = await tools(max_bytes=100_000).fetch(site.url("/huge"), max_chars=500)
    assert "the download stopped after 100,000 bytes" in out
    assert "[Cut: characters 0-500 of 100000 shown." in out
    await asyncio.wait_for(stopped.wait(), 5)  # the connection was dropped, not drained
    assert sent < 50_000_000


async def test_redirects_are_followed_and_bounded(serve: Any, tools: Any) -> None:
    site = await serve({
        "/old": redirect("/older"),
        "/older": redirect("/page", 301),
        "/page": respond("<h1>Moved here</h1>", "text/html"),
        "/loop": redirect("/loop"),
        "/to-ftp": redirect("ftp://127.0.0.1/file"),
    })  # fmt: skip
    web_tools = tools(max_redirects=3)
    out = await web_tools.fetch(site.url("/old"))
    assert out.startswith(f"URL: {site.url('/page')} (redirected from {site.url('/old')})")
    assert "# Moved here" in out
    with pytest.raises(ToolError, match="redirected more than 3 times"):
        await web_tools.fetch(site.url("/loop"))
    assert sum(r["path"] == "/loop" for r in site.requests) == 4  # the first request + 3
    with pytest.raises(ToolError, match="not an http\\(s\\) page"):
        await web_tools.fetch(site.url("/to-ftp"))


async def test_http_errors_say_what_happened_and_what_to_do(serve: Any, tools: Any) -> None:
    site = await serve({
        "/gone": respond("nope", "text/plain", status=404),
        "/broken": respond("oops", "text/plain", status=500),
        "/private": respond("no", "text/plain", status=403),
    })  # fmt: skip
    web_tools = tools()
    with pytest.raises(ToolError) as info:
        await web_tools.fetch(site.url("/gone"))
    assert str(info.value) == (
        f"HTTP 404 Not Found for {site.url('/gone')}: the page does not exist; check the URL "
        "or search for the right page"
    )
    with pytest.raises(ToolError, match=r"HTTP 500 Internal Server Error .* try again later"):
        await web_tools.fetch(site.url("/broken"))
    with pytest.raises(ToolError, match=r"HTTP 403 Forbidden .* use another source"):
        await web_tools.fetch(site.url("/private"))


async def test_an_unreachable_host_is_a_tool_error(serve: Any, tools: Any) -> None:
    site = await serve({"/": respond("x", "text/plain")})
    url = site.url("/")
    await site.server.close()
    with pytest.raises(ToolError, match=r"cannot fetch .*check the address"):
        await tools().fetch(url)


async def test_a_page_that_does_not_answer_in_time_is_a_tool_error(serve: Any, tools: Any) -> None:
    release = asyncio.Event()

    async def stall(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="too late")

    site = await serve({"/slow": stall})
    try:
        with pytest.raises(ToolError) as info:
            await tools(timeout=0.3).fetch(site.url("/slow"))
    finally:
        release.set()
    assert str(info.value) == (
        f"{site.url('/slow')} did not answer within 0.3 s; try again later or use another source"
    )


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://127.0.0.1/x", "javascript:alert(1)", "data:text/plain,hi",
     "http://", "mailto:a@b.c"],
)  # fmt: skip
async def test_only_http_and_https_urls_are_fetched(url: str, tools: Any) -> None:
    with pytest.raises(ToolError, match="only reads http:// and https:// URLs"):
        await tools().fetch(url)


async def test_long_output_is_cut_and_the_model_can_read_on(serve: Any, tools: Any) -> None:
    lines = [f"line {i:04d} " + "x" * 40 for i in range(400)]
    page = "\n".join(lines)
    site = await serve({"/long.txt": respond(page, "text/plain")})
    web_tools = tools(max_chars=2000)
    first = await web_tools.fetch(site.url("/long.txt"))
    note = first.rsplit("\n\n", 1)[1]
    assert note.startswith("[Cut: characters 0-") and f"of {len(page)} shown." in note
    end = int(note.split("-", 1)[1].split(" ", 1)[0])
    assert end <= 2000 and page[end] == "\n"  # cut at a line end
    second = await web_tools.fetch(site.url("/long.txt"), start=end)
    shown = first.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
    assert second.split("\n\n", 1)[1].startswith(page[end:end + 100])  # fmt: skip
    assert shown == page[:end]
    last = await web_tools.fetch(site.url("/long.txt"), start=len(page) - 10)
    assert last.endswith(f"[Characters {len(page) - 10}-{len(page)} of {len(page)}: the end.]")
    with pytest.raises(ToolError, match="past the end"):
        await web_tools.fetch(site.url("/long.txt"), start=len(page) + 5)


async def test_a_big_page_is_converted_without_blocking_the_loop(serve: Any, tools: Any) -> None:
    # the autouse fixture in conftest.py fails the test if a callback blocked the loop
    rows = "".join(f"<p>Paragraph {i} with <a href='/p{i}'>a link</a>.</p>" for i in range(6000))
    site = await serve({"/big": respond(f"<html><body>{rows}</body></html>", "text/html")})
    out = await tools(max_bytes=5_000_000, max_chars=1000).fetch(site.url("/big"))
    assert f"Paragraph 0 with [a link]({site.url('/p0')})." in out and "[Cut:" in out


# ------------------------------------------------------------------------------ address guard

# URLs that reach this machine, a private network or cloud metadata; {port} is a live test
# server's port on 127.0.0.1 (the forms that would reach it) or unused (the others).
LOOPBACK_TRICKS = [
    "http://127.0.0.1:{port}/secret",
    "http://localhost:{port}/secret",  # a name that resolves to 127.0.0.1
    "http://LOCALHOST.:{port}/secret",
    "http://api.localhost:{port}/secret",  # *.localhost is this machine (RFC 6761)
    "http://127.0.0.2:{port}/secret",
    "http://2130706433:{port}/secret",  # 127.0.0.1 as one decimal number
    "http://0x7f.1:{port}/secret",  # hex and short forms the C resolver accepts
    "http://0x7f000001:{port}/secret",
    "http://0177.0.0.1:{port}/secret",  # octal
    "http://127.1:{port}/secret",
    "http://[::ffff:127.0.0.1]:{port}/secret",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]:{port}/secret",
    "http://[::1]:{port}/secret",
    "http://0.0.0.0:{port}/secret",  # connects to this machine on Linux
    "http://[::]:{port}/secret",
    "http://evil.example@127.0.0.1:{port}/secret",  # userinfo trick
    "http://127.0.0.1:{port}@evil.example/secret",
    "127.0.0.1:{port}/secret",  # no scheme: https:// is assumed
    "http://%31%32%37.0.0.1:{port}/secret",  # percent-encoded host
    "http://\u2460\u2461\u2466.0.0.1:{port}/secret",  # Unicode digits (IDNA makes them 127)
]
PRIVATE_TRICKS = [
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://[fe80::1]/",  # link-local
    "http://[fec0::1]/",  # site-local
    "http://[fc00::1]/",  # unique local
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://240.0.0.1/",  # reserved
    "http://[64:ff9b::7f00:1]/",  # NAT64 form of 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 form of 169.254.169.254
    "http://[2002:7f00:1::]/",  # 6to4 form of 127.0.0.1
    "http://[::127.0.0.1]/",  # IPv4-compatible (deprecated)
]


@pytest.mark.parametrize("template", LOOPBACK_TRICKS)
async def test_addresses_on_this_machine_are_refused(template: str, serve: Any, tools: Any) -> None:
    site = await serve({"/secret": respond("TOP SECRET", "text/plain")})
    url = template.format(port=site.server.port)
    with pytest.raises(ToolError) as info:
        await tools(allow_hosts=[], timeout=5).fetch(url)
    message = str(info.value)
    assert "TOP SECRET" not in message and site.requests == []
    assert "fetch_url refused" in message and "evil.example" not in message.split(":")[0]
    # the template, not the URL: a random port such as 40177 must not look like octal
    numeric = any(form in template for form in ("2130706433", "0x", "0177", "127.1:", "%31"))
    if "@" in template or numeric:
        assert "give" in message  # says what to give instead
    else:
        assert "Web(allow_hosts=[" in message  # says how to allow it


@pytest.mark.parametrize("url", PRIVATE_TRICKS)
async def test_private_link_local_and_metadata_addresses_are_refused(url: str, tools: Any) -> None:
    # refused before any connection is attempted (nothing leaves this machine)
    with pytest.raises(ToolError, match=r"fetch_url refused .* is .*Web\(allow_hosts=\[") as info:
        await tools(allow_hosts=[], timeout=5).fetch(url)
    if "169.254.169.254" in url or "ec2" in url or "100.100" in url:
        assert "cloud metadata service" in str(info.value)


def redirect_here(template: str) -> Handler:
    """A redirect to ``template`` with ``{port}`` the port the request came to."""

    async def handler(request: web.Request) -> web.StreamResponse:
        port = request.transport.get_extra_info("sockname")[1]  # type: ignore[union-attr]
        return web.Response(status=302, headers={"Location": template.format(port=port)})

    return handler


async def test_a_redirect_to_this_machine_is_refused(serve: Any, tools: Any) -> None:
    site = await serve({
        "/jump": redirect_here("http://127.0.0.1:{port}/secret"),
        "/jump-mapped": redirect_here("http://[::ffff:127.0.0.1]:{port}/secret"),
        "/jump-decimal": redirect_here("http://2130706433:{port}/secret"),
        "/secret": respond("TOP SECRET", "text/plain"),
    })  # fmt: skip
    port = site.server.port
    web_tools = tools(allow_hosts=["localhost"])  # the name is allowed, 127.0.0.1 itself is not
    for path in ("/jump", "/jump-mapped", "/jump-decimal"):
        with pytest.raises(ToolError, match="fetch_url refused") as info:
            await web_tools.fetch(f"http://localhost:{port}{path}")
        assert "TOP SECRET" not in str(info.value)
    assert [r["path"] for r in site.requests] == ["/jump", "/jump-mapped", "/jump-decimal"]


def scripted_dns(answers: dict[str, list[str]], asked: list[str]) -> Any:
    """A DNS stand-in for ``Web._getaddrinfo`` (the seam where the loop's getaddrinfo is used):
    ``answers`` maps a name to its addresses; every question is recorded in ``asked``."""

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    return getaddrinfo


async def test_names_resolving_to_blocked_addresses_are_refused(serve: Any, tools: Any) -> None:
    site = await serve({"/secret": respond("TOP SECRET", "text/plain")})
    asked: list[str] = []
    web_tools = tools(allow_hosts=[])
    web_tools._getaddrinfo = scripted_dns(
        {
            "rebind.test": ["127.0.0.1"],
            "mixed.test": ["93.184.216.34", "127.0.0.1"],  # one bad answer is enough
            "metadata.test": ["169.254.169.254"],
            "mapped.test": ["::ffff:127.0.0.1"],
            "private.test": ["10.1.2.3"],
        },
        asked,
    )
    port = site.server.port
    for name, why in (("rebind.test", "a loopback address"), ("mixed.test", "a loopback"),
                      ("metadata.test", "the cloud metadata service"),
                      ("mapped.test", "the IPv4-mapped form of 127.0.0.1"),
                      ("private.test", "a private-network address")):  # fmt: skip
        with pytest.raises(ToolError) as info:
            await web_tools.fetch(f"http://{name}:{port}/secret")
        message = str(info.value)
        assert f"fetch_url refused http://{name}:{port}/secret: {name} (it resolves to " in message
        assert why in message and f"Web(allow_hosts=['{name}'])" in message
    assert site.requests == [] and sorted(set(asked)) == sorted(
        ["rebind.test", "mixed.test", "metadata.test", "mapped.test", "private.test"]
    )


async def test_allowed_names_connect_to_the_address_that_was_checked(
    serve: Any, tools: Any
) -> None:
    site = await serve({
        "/page": respond("intranet page", "text/plain"),
        "/jump": redirect_here("http://rebind.test:{port}/page"),
    })  # fmt: skip
    asked: list[str] = []
    web_tools = tools(allow_hosts=["Intranet.Test"])
    web_tools._getaddrinfo = scripted_dns(
        {"intranet.test": ["127.0.0.1"], "rebind.test": ["127.0.0.1"]}, asked
    )
    port = site.server.port
    out = await web_tools.fetch(f"http://intranet.test:{port}/page")
    assert out.endswith("intranet page")
    assert asked == ["intranet.test"]  # one lookup: its answer is what was connected to
    assert site.requests[0]["headers"]["Host"] == f"intranet.test:{port}"
    with pytest.raises(ToolError, match=r"rebind\.test \(it resolves to 127\.0\.0\.1\)"):
        await web_tools.fetch(f"http://intranet.test:{port}/jump")  # the hop is checked too
    assert [r["path"] for r in site.requests] == ["/page", "/jump"]


async def test_allowed_networks(serve: Any, tools: Any) -> None:
    site = await serve({"/": respond("local page", "text/plain")})
    port = site.server.port
    for allowed in (["127.0.0.0/8"], ["127.0.0.1"], ["10.0.0.0/8", "127.0.0.1/32"]):
        web_tools = tools(allow_hosts=allowed)
        web_tools._getaddrinfo = scripted_dns({"box.test": ["127.0.0.1"]}, [])
        assert (await web_tools.fetch(f"http://127.0.0.1:{port}/")).endswith("local page")
        assert (await web_tools.fetch(f"http://box.test:{port}/")).endswith("local page")
        with pytest.raises(ToolError, match="fetch_url refused"):
            await web_tools.fetch("http://169.254.169.254/")  # the rest stays refused
    for bad in (["http://intranet/"], ["a b"], [""], "127.0.0.1"):
        with pytest.raises(UsageError, match="allow_hosts"):
            Web(env={}, allow_hosts=bad)


# ------------------------------------------------------------------------------ web_search


def searxng_handler(request: web.Request) -> Awaitable[web.StreamResponse]:
    async def answer() -> web.StreamResponse:
        results = [
            {"title": f"Nile {i}", "url": f"https://example.org/{i}", "content": f"About {i}"}
            for i in range(8)
        ]
        return web.json_response({"query": request.query["q"], "results": results})

    return answer()


async def test_searxng_provider(serve: Any, tools: Any) -> None:
    site = await serve({"/searx/search": searxng_handler})
    provider = SearxngProvider(site.url("/searx/"))
    web_tools = tools(provider=provider)
    out = await web_tools.search("longest river", max_results=3)
    assert out == (
        "1. Nile 0\n   https://example.org/0\n   About 0\n"
        "2. Nile 1\n   https://example.org/1\n   About 1\n"
        "3. Nile 2\n   https://example.org/2\n   About 2"
    )
    request = site.requests[0]
    assert request["method"] == "GET" and request["path"] == "/searx/search"
    assert request["query"] == {"q": "longest river", "format": "json"}


async def test_searxng_without_the_json_format_gets_a_fix_hint(serve: Any, tools: Any) -> None:
    site = await serve({"/search": respond("Forbidden", "text/html", status=403)})
    with pytest.raises(ToolError, match=r"enable 'json' under search\.formats"):
        await tools(provider=SearxngProvider(site.url("/"))).search("x")


async def test_tavily_provider(serve: Any, tools: Any) -> None:
    async def tavily(request: web.Request) -> web.StreamResponse:
        return web.json_response({
            "query": "q",
            "results": [
                {"title": "Nile - Wikipedia", "url": "https://en.wikipedia.org/wiki/Nile",
                 "content": "The Nile is a major river.", "score": 0.9},
                {"title": "no url"},
            ],
        })  # fmt: skip

    site = await serve({"/search": tavily})
    provider = TavilyProvider(SECRET, base_url=site.url("/"))
    results = await provider.search("nile length", 4)
    assert results == [
        SearchResult("Nile - Wikipedia", "https://en.wikipedia.org/wiki/Nile",
                     "The Nile is a major river.")
    ]  # fmt: skip
    request = site.requests[0]
    assert request["method"] == "POST" and request["path"] == "/search"
    assert json.loads(request["body"]) == {"query": "nile length", "max_results": 4}
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"
    await provider.aclose()


async def test_brave_provider(serve: Any, tools: Any) -> None:
    async def brave(request: web.Request) -> web.StreamResponse:
        return web.json_response({
            "type": "search",
            "web": {"results": [
                {"title": "The <strong>Nile</strong>", "url": "https://nile.example/",
                 "description": "The <strong>Nile</strong> &amp; its delta."},
            ]},
        })  # fmt: skip

    site = await serve({"/res/v1/web/search": brave})
    web_tools = tools(provider=BraveProvider("brave-key-42", base_url=site.url("/res/v1")))
    out = await web_tools.search("nile", max_results=50)
    assert out == "1. The Nile\n   https://nile.example/\n   The Nile & its delta."
    request = site.requests[0]
    assert request["query"] == {"q": "nile", "count": "10"}  # the tool caps max_results at 10
    assert request["headers"]["X-Subscription-Token"] == "brave-key-42"
    assert request["headers"]["Accept"] == "application/json"


async def test_no_results_and_empty_queries(serve: Any, tools: Any) -> None:
    async def empty(request: web.Request) -> web.StreamResponse:
        return web.json_response({"results": []})

    site = await serve({"/search": empty})
    web_tools = tools(provider=SearxngProvider(site.url("/")))
    assert await web_tools.search("zzqx") == "No results for 'zzqx'. Try other words."
    with pytest.raises(ToolError, match="query is empty"):
        await web_tools.search("  ")
    assert len(site.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 500])
async def test_api_keys_never_leak_into_errors_or_logs(
    status: int, serve: Any, tools: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def hostile(request: web.Request) -> web.StreamResponse:
        # a server that echoes the credentials it was sent into its error body
        sent = request.headers.get("Authorization", "") + request.headers.get(
            "X-Subscription-Token", ""
        )
        return web.Response(status=status, text=f"bad credentials: {sent}")

    caplog.set_level(logging.DEBUG)
    site = await serve({"/search": hostile, "/web/search": hostile})
    providers = [
        (TavilyProvider(SECRET, base_url=site.url("/")), "TAVILY_API_KEY"),
        (BraveProvider(SECRET, base_url=site.url("/")), "BRAVE_API_KEY"),
    ]
    for provider, variable in providers:
        web_tools = tools(provider=provider)
        with pytest.raises(ToolError) as info:
            await web_tools.search("anything")
        message = str(info.value)
        assert SECRET not in message and "***" in message  # the echoed key was redacted
        assert f"HTTP {status}" in message
        assert (variable in message) == (status != 500)
        assert SECRET not in repr(provider) and SECRET not in repr(web_tools)
    assert len(site.requests) == 2 and SECRET not in caplog.text


async def test_an_unreachable_search_service_error_has_no_key(serve: Any, tools: Any) -> None:
    site = await serve({"/": respond("x", "text/plain")})
    base = site.url("/")
    await site.server.close()
    with pytest.raises(ToolError, match="cannot reach Tavily") as info:
        await tools(provider=TavilyProvider(SECRET, base_url=base)).search("x")
    assert SECRET not in str(info.value)
    searx = SearxngProvider(base.replace("http://", "http://admin:hunter2@"))
    with pytest.raises(ToolError) as info:
        await tools(provider=searx).search("x")
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(searx)


# ------------------------------------------------------------------------------ configuration


def test_provider_from_env_precedence() -> None:
    assert provider_from_env({}) is None
    all_set = {
        "SEARXNG_URL": "http://searx.local:8888",
        "TAVILY_API_KEY": "tk",
        "BRAVE_API_KEY": "bk",
    }
    searx = provider_from_env(all_set)
    assert isinstance(searx, SearxngProvider) and searx.base_url == "http://searx.local:8888"
    assert isinstance(provider_from_env({**all_set, "SEARXNG_URL": ""}), TavilyProvider)
    assert isinstance(provider_from_env({"BRAVE_API_KEY": "bk"}), BraveProvider)
    explicit = {**all_set, "AGENTICA_SEARCH_PROVIDER": "Brave"}
    assert isinstance(provider_from_env(explicit), BraveProvider)
    assert provider_from_env({**all_set, "AGENTICA_SEARCH_PROVIDER": "none"}) is None
    with pytest.raises(UsageError, match="needs TAVILY_API_KEY"):
        provider_from_env({"AGENTICA_SEARCH_PROVIDER": "tavily", "BRAVE_API_KEY": "bk"})
    with pytest.raises(UsageError, match="not a search provider"):
        provider_from_env({"AGENTICA_SEARCH_PROVIDER": "google"})


def test_web_search_is_offered_only_when_a_provider_is_configured() -> None:
    def names(capability: Web) -> list[str]:
        return [t.name for t in capability.tools()]  # type: ignore[union-attr]

    assert names(Web(env={})) == ["fetch_url"]
    assert names(Web(env={"BRAVE_API_KEY": "bk"})) == ["fetch_url", "web_search"]
    assert names(Web(env={}, provider=SearxngProvider("http://127.0.0.1:1"))) == [
        "fetch_url",
        "web_search",
    ]
    assert names(Web(env={"TAVILY_API_KEY": "k", "AGENTICA_SEARCH_PROVIDER": "none"})) == [
        "fetch_url"
    ]


def test_tool_schemas_are_short() -> None:
    capability = Web(env={"SEARXNG_URL": "http://127.0.0.1:1"}, max_chars=3000)
    fetch, search = (t.definition for t in capability.tools())  # type: ignore[union-attr]
    assert fetch.parameters["properties"]["max_chars"]["default"] == 3000
    assert fetch.parameters["required"] == ["url"] and search.parameters["required"] == ["query"]
    assert len(fetch.description) < 60 and len(search.description) < 60


# ------------------------------------------------------------------------------ through an agent


async def test_the_tools_work_in_an_agent_run(serve: Any, tools: Any) -> None:
    site = await serve({"/nile": respond(ARTICLE, "text/html"), "/search": searxng_handler})
    model = ScriptedModel([
        tool_calls(call("web_search", query="nile", max_results=2)),
        tool_calls(call("fetch_url", url=site.url("/nile")), call("fetch_url", url="file:///x")),
        "The Nile is 6650 km long.",
    ])  # fmt: skip
    web_tools = tools(env={"SEARXNG_URL": site.url("/")})
    response = await Agent(model=model, capabilities=[web_tools]).run("How long is the Nile?")
    assert response.content == "The Nile is 6650 km long."
    assert {t.name for t in model.requests[0].tools} == {"fetch_url", "web_search"}
    search_result, page, refused = [
        m for m in model.requests[2].messages if isinstance(m, ToolMessage)
    ]
    assert search_result.content.startswith("1. Nile 0\n   https://example.org/0")
    assert "2. Nile 1" in search_result.content and "3." not in search_result.content
    assert not page.is_error and "- Length: 6650 km" in page.content
    assert refused.is_error and "only reads http:// and https:// URLs" in refused.content
