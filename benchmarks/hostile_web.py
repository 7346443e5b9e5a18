"""Hostile probe: ``fetch_url`` against addresses on this machine (server-side request forgery).
``uv run python benchmarks/hostile_web.py``

Offline, loopback only. A "secret" server listens on 127.0.0.1 (and ::1 when the machine has
it); a redirector listens on 127.0.0.1 under an allowed name (``hop.test``, answered by a
scripted DNS, the ``Web._getaddrinfo`` seam). Every URL variant that names the secret server (the
plain and short IPv4 forms, decimal/octal/hex numbers, ``localhost`` spellings, IPv6 loopback,
IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms, ``0.0.0.0``, user-info tricks, percent- and
Unicode-encoded hosts, names whose DNS answer is 127.0.0.1 or ::1 or mixes a public address with
127.0.0.1) is fetched with the default ``Web()`` four ways: directly, through one 302 from the
allowed host, through a 307, and through a chain of two redirects.

- ssrf: attempts = URL variants x delivery. A failure is any outcome but the guard's refusal: a
  request that reached the secret server, another error (the guard let it through and something
  else stopped it), an exception other than ``ToolError`` or a hang (10 s).
- ssrf-control (not a probe family, a check that the probe is real): the same variants (but
  the 4 that embed 127.0.0.1 in a global IPv6 address, which would leave the machine) fetched
  directly with the guard opened (``allow_hosts=["0.0.0.0/0", "::/0", <the names>]``); the
  variants that reach the secret server are counted in its text, and it fails only when none
  does (then the probe would prove nothing).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from agentica.deep.web import Web  # noqa: E402
from agentica.errors import ToolError  # noqa: E402

SECRET = "SECRET-PAGE-7f3a"

# {p}: the secret server's port
HOSTS = [
    "127.0.0.1:{p}", "127.0.0.2:{p}", "127.255.255.254:{p}", "127.0.0.1.:{p}",
    "127.000.000.001:{p}", "127.1:{p}", "127.0.1:{p}", "2130706433:{p}", "017700000001:{p}",
    "0x7f000001:{p}", "0x7f.1:{p}", "0x7f.0.0.1:{p}", "0177.0.0.1:{p}", "0177.1:{p}",
    "0:{p}", "0.0.0.0:{p}", "localhost:{p}", "LOCALHOST:{p}", "localhost.:{p}",
    "api.localhost:{p}", "[::1]:{p}", "[0:0:0:0:0:0:0:1]:{p}", "[::]:{p}",
    "[::ffff:127.0.0.1]:{p}", "[::ffff:7f00:1]:{p}", "[0:0:0:0:0:ffff:127.0.0.1]:{p}",
    "[::127.0.0.1]:{p}", "[64:ff9b::127.0.0.1]:{p}", "[2002:7f00:1::]:{p}",
    "evil.example@127.0.0.1:{p}", "user:pw@localhost:{p}", "127.0.0.1:{p}@evil.example",
    "%31%32%37.0.0.1:{p}", "\u2460\u2461\u2466.0.0.1:{p}", "\uff11\uff12\uff17.0.0.1:{p}",
    "rebind.test:{p}", "mixed.test:{p}", "v6.test:{p}", "mapped.test:{p}", "nat64.test:{p}",
]  # fmt: skip
DNS = {
    "hop.test": ["127.0.0.1"],
    "rebind.test": ["127.0.0.1"],
    "mixed.test": ["127.0.0.1", "93.184.216.34"],  # loopback first: a guard failure stays local
    "v6.test": ["::1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "nat64.test": ["64:ff9b::7f00:1"],
}
# the control run connects: never to an address off this machine, so it leaves out the forms
# that embed 127.0.0.1 in a global IPv6 address (a connection to them would leave the machine)
CONTROL_DNS = {**DNS, "mixed.test": ["127.0.0.1"]}
CONTROL_SKIP = ("[::127.0.0.1]", "[64:ff9b::127.0.0.1]", "[2002:7f00:1::]", "nat64.test")


def scripted_dns(answers: dict[str, list[str]]) -> Any:
    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        if host not in answers:
            return await asyncio.get_running_loop().getaddrinfo(host, port, **kwargs)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    return getaddrinfo


async def _start(app: web.Application, hosts: list[str], port: int = 0) -> tuple[Any, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    server = await asyncio.get_running_loop().create_server(
        runner.server, host=hosts, port=port, reuse_address=True
    )
    return (runner, server), server.sockets[0].getsockname()[1]


async def _probe() -> list[dict[str, Any]]:
    hits: list[str] = []

    async def secret(request: web.Request) -> web.Response:
        hits.append(request.path_qs)
        return web.Response(text=SECRET)

    async def hop(request: web.Request) -> web.Response:
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": request.query["to"]})

    async def hop2(request: web.Request) -> web.Response:
        target = request.url.with_path("/r").with_query(to=request.query["to"])
        return web.Response(status=302, headers={"Location": str(target)})

    secret_app = web.Application()
    secret_app.router.add_route("*", "/{tail:.*}", secret)
    hop_app = web.Application()
    hop_app.router.add_get("/r", hop)
    hop_app.router.add_get("/r2", hop2)
    try:
        secret_srv, port = await _start(secret_app, ["127.0.0.1", "::1"])
    except OSError:  # no IPv6 loopback here
        secret_srv, port = await _start(secret_app, ["127.0.0.1"])
    hop_srv, hop_port = await _start(hop_app, ["127.0.0.1"])
    urls = [f"http://{h.format(p=port)}/secret" for h in HOSTS]
    base = f"http://hop.test:{hop_port}"
    deliveries = {
        "direct": lambda u: u,
        "302": lambda u: f"{base}/r?{_q(u)}",
        "307": lambda u: f"{base}/r?status=307&{_q(u)}",
        "2 hops": lambda u: f"{base}/r2?{_q(u)}",
    }
    attempts = failures = 0
    details: list[str] = []
    guarded = Web(env={}, allow_hosts=["hop.test"], timeout=10)
    guarded._getaddrinfo = scripted_dns(DNS)
    for name, deliver in deliveries.items():
        for url in urls:
            attempts += 1
            before = len(hits)
            outcome = await _fetch(guarded, deliver(url))
            if len(hits) > before or outcome != "refused":
                failures += 1
                details.append(f"{name} {url}: {outcome}, {len(hits) - before} requests reached")
    await guarded.aclose()

    opened_names = ["localhost", "api.localhost", "hop.test", *DNS]
    control = Web(env={}, allow_hosts=["0.0.0.0/0", "::/0", *opened_names], timeout=10)
    control._getaddrinfo = scripted_dns(CONTROL_DNS)
    reached = 0
    control_urls = [u for u in urls if not any(skip in u for skip in CONTROL_SKIP)]
    for url in control_urls:
        before = len(hits)
        await _fetch(control, url)
        reached += len(hits) > before
    await control.aclose()
    for runner, server in (secret_srv, hop_srv):
        server.close()
        await runner.cleanup()
    return [
        {
            "family": "ssrf",
            "attempts": attempts,
            "failures": failures,
            "what": (
                f"fetch_url with the default Web() at {len(urls)} URL forms of a server on "
                "127.0.0.1/::1 (numeric, mapped, NAT64/6to4, localhost, userinfo, encoded, DNS "
                "answers of loopback), each directly, via 302, via 307 and via 2 redirects from "
                "an allowed host; failure = not refused by the address guard (a request reached "
                "the server, another error, an untyped exception or a hang)"
            ),
            "details": details,
        },
        {
            "family": "ssrf-control",
            "attempts": len(control_urls),
            "failures": 0 if reached else 1,
            "what": (
                "the same URL forms (but the 4 that embed 127.0.0.1 in a global IPv6 address) "
                "fetched directly with the guard opened (allow_hosts 0.0.0.0/0, ::/0 and the "
                f"names): {reached} reached the server, so the probe is real; "
                "failure = none reached it (the probe would prove nothing)"
            ),
            "details": [],
        },
    ]


def _q(url: str) -> str:
    from urllib.parse import urlencode

    return urlencode({"to": url})


async def _fetch(capability: Web, url: str) -> str:
    try:
        out = await asyncio.wait_for(capability.fetch(url), 10)
    except ToolError as exc:
        return "refused" if "refused" in str(exc) or "not a valid URL" in str(exc) else "error"
    except TimeoutError:
        return "hang"
    except Exception as exc:  # an untyped exception is a failure of the probe's target
        return f"untyped {type(exc).__name__}: {exc}"
    return "leaked" if SECRET in out else "fetched"


def run() -> list[dict[str, Any]]:
    return asyncio.run(_probe())


if __name__ == "__main__":
    for row in run():
        details = row.pop("details")
        print(row)
        for line in details:
            print("   ", line)
