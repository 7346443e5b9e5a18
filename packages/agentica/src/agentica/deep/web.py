"""``Web``: the capability that lets an agent read web pages and search the web.

```python
agent = Agent(model=..., capabilities=[Web()])  # fetch_url, plus web_search if configured
```

``fetch_url`` reads one http(s) page as Markdown or text, connecting only to public addresses
unless ``allow_hosts`` says otherwise; ``web_search`` asks a ``SearchProvider`` (SearXNG, Tavily,
Brave; ``provider_from_env``) and is offered only when one is configured. ``Web`` has the details.
"""

from __future__ import annotations

import asyncio
import codecs
import html as html_lib
import ipaddress
import json
import logging
import os
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import urljoin, urlsplit, urlunsplit

from agentica._http import HttpClientPool
from agentica.errors import ToolError, UsageError
from agentica.run.capability import Capability
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver, ResolveResult
    from bs4 import Tag
    from yarl import URL

__all__ = [
    "BraveProvider",
    "SearchProvider",
    "SearchResult",
    "SearxngProvider",
    "TavilyProvider",
    "Web",
    "html_to_markdown",
    "provider_from_env",
]

logger = logging.getLogger(__name__)

PROVIDER_ENV = "AGENTICA_SEARCH_PROVIDER"
_SEARCH_RESPONSE_BYTES = 2_000_000  # the most bytes read from a search API's answer
_MAX_SEARCH_RESULTS = 10

# ---------------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One web search hit."""

    title: str
    url: str
    snippet: str = ""


class SearchProvider(Protocol):
    """A web search engine: ``await provider.search(query, n)`` returns at most ``n`` results.

    Raise ``ToolError`` with a message for the model when the search fails; it must not contain
    credentials.
    """

    async def search(self, query: str, n: int) -> list[SearchResult]: ...


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _display_url(url: str) -> str:
    """``url`` without user name, password, query or fragment (safe to show)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


_TAG_RE = re.compile(r"<[^>]+>")
_SPACE_RE = re.compile(r"\s+")


def _plain(value: Any) -> str:
    """A search API's field as one line of plain text (tags such as ``<strong>`` removed)."""
    if not isinstance(value, str):
        return ""
    return _SPACE_RE.sub(" ", html_lib.unescape(_TAG_RE.sub("", value))).strip()


async def _read_capped(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether there was more (then reading stopped)."""
    buf = bytearray()
    while len(buf) <= limit:
        chunk = await resp.content.read(min(65536, limit + 1 - len(buf)))
        if not chunk:
            return bytes(buf), False
        buf += chunk
    return bytes(buf[:limit]), True


class _HTTPSearchProvider:
    """What the HTTP search providers share: a pooled client, a timeout, safe error messages."""

    label = "search"
    key_env = ""

    def __init__(self, base_url: str, *, api_key: str = "", timeout: float = 15.0) -> None:
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise UsageError(f"{self.label} base URL must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._api_key = api_key
        self._pool = HttpClientPool(max_connections=16)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {_display_url(self.base_url)}>"

    async def aclose(self) -> None:
        """Close the HTTP session of the running loop."""
        await self._pool.aclose()

    def _secrets(self) -> tuple[str, ...]:
        parts = urlsplit(self.base_url)
        return tuple(s for s in (self._api_key, parts.password or "") if s)

    def _fail(self, message: str) -> ToolError:
        return ToolError(_redact(message, self._secrets()))

    def _status_error(self, status: int, body: bytes) -> ToolError:
        if status in (401, 403) and self.key_env:
            hint = f"the API key was rejected; check {self.key_env}"
        elif status == 429:
            hint = "rate limit or quota reached; wait before searching again"
        elif status >= 500:
            hint = "the search service failed; try again later"
        else:
            hint = "the search request was refused"
        detail = _plain(body[:300].decode("utf-8", "replace"))
        detail = f" ({detail[:200]})" if detail else ""
        return self._fail(f"web search failed: {self.label} answered HTTP {status}: {hint}{detail}")

    async def _request_json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        import aiohttp

        url = self.base_url + path
        where = _display_url(url)
        session = self._pool.session()
        try:
            async with session.request(
                method,
                url,
                params=params,
                json=body,
                headers={"Accept": "application/json", **(headers or {})},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                allow_redirects=False,
            ) as resp:
                raw, _ = await _read_capped(resp, _SEARCH_RESPONSE_BYTES)
                if resp.status >= 400:
                    raise self._status_error(resp.status, raw)
                if resp.status >= 300:
                    raise self._fail(
                        f"web search failed: {self.label} at {where} answered with a redirect "
                        f"(HTTP {resp.status}); check its URL"
                    )
        except TimeoutError:
            raise self._fail(
                f"web search failed: {self.label} did not answer within {self.timeout:g} s; "
                "try again later"
            ) from None
        except aiohttp.ClientError as exc:
            raise self._fail(
                f"web search failed: cannot reach {self.label} at {where} "
                f"({type(exc).__name__}); try again later"
            ) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise self._fail(
                f"web search failed: {self.label} answered with something that is not JSON"
            ) from None

    @staticmethod
    def _results(items: Any, n: int, snippet_key: str) -> list[SearchResult]:
        out: list[SearchResult] = []
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                continue
            url = item.get("url")
            if not isinstance(url, str) or not url:
                continue
            title = _plain(item.get("title")) or url
            out.append(SearchResult(title=title, url=url, snippet=_plain(item.get(snippet_key))))
            if len(out) >= n:
                break
        return out


class SearxngProvider(_HTTPSearchProvider):
    """A SearXNG instance (``GET {base_url}/search?q=...&format=json``).

    The instance must allow the JSON format (``search: formats: [html, json]`` in its
    ``settings.yml``). A user name and password may be given in the URL.
    """

    label = "SearXNG"

    def __init__(self, base_url: str, *, timeout: float = 15.0) -> None:
        super().__init__(base_url, timeout=timeout)

    def _status_error(self, status: int, body: bytes) -> ToolError:
        if status == 403:
            return self._fail(
                "web search failed: SearXNG refused the JSON format (HTTP 403); enable 'json' "
                "under search.formats in its settings.yml"
            )
        return super()._status_error(status, body)

    async def search(self, query: str, n: int) -> list[SearchResult]:
        data = await self._request_json("GET", "/search", params={"q": query, "format": "json"})
        items = data.get("results") if isinstance(data, dict) else None
        return self._results(items, n, "content")


class TavilyProvider(_HTTPSearchProvider):
    """The Tavily search API (``POST {base_url}/search``, the key as a bearer token)."""

    label = "Tavily"
    key_env = "TAVILY_API_KEY"

    def __init__(
        self, api_key: str, *, base_url: str = "https://api.tavily.com", timeout: float = 15.0
    ) -> None:
        if not api_key:
            raise UsageError("TavilyProvider needs an API key (TAVILY_API_KEY)")
        super().__init__(base_url, api_key=api_key, timeout=timeout)

    async def search(self, query: str, n: int) -> list[SearchResult]:
        data = await self._request_json(
            "POST",
            "/search",
            body={"query": query, "max_results": n},
            headers={"Authorization": f"Bearer {self._api_key}"},
        )
        items = data.get("results") if isinstance(data, dict) else None
        return self._results(items, n, "content")


class BraveProvider(_HTTPSearchProvider):
    """The Brave web search API (``GET {base_url}/web/search``, ``X-Subscription-Token``)."""

    label = "Brave Search"
    key_env = "BRAVE_API_KEY"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "https://api.search.brave.com/res/v1",
        timeout: float = 15.0,
    ) -> None:
        if not api_key:
            raise UsageError("BraveProvider needs an API key (BRAVE_API_KEY)")
        super().__init__(base_url, api_key=api_key, timeout=timeout)

    async def search(self, query: str, n: int) -> list[SearchResult]:
        data = await self._request_json(
            "GET",
            "/web/search",
            params={"q": query, "count": str(min(n, 20))},
            headers={"X-Subscription-Token": self._api_key},
        )
        web = data.get("web") if isinstance(data, dict) else None
        items = web.get("results") if isinstance(web, dict) else None
        return self._results(items, n, "description")


_PROVIDERS: dict[str, tuple[str, Callable[[str], SearchProvider]]] = {
    "searxng": ("SEARXNG_URL", SearxngProvider),
    "tavily": ("TAVILY_API_KEY", TavilyProvider),
    "brave": ("BRAVE_API_KEY", BraveProvider),
}


def provider_from_env(env: Mapping[str, str] = os.environ) -> SearchProvider | None:
    """The search provider the environment configures, or ``None``.

    ``AGENTICA_SEARCH_PROVIDER`` (``searxng``, ``tavily``, ``brave``, ``none``) chooses one
    explicitly; otherwise the first of ``SEARXNG_URL``, ``TAVILY_API_KEY``, ``BRAVE_API_KEY`` that
    is set (not empty) is used. Raises ``UsageError`` when the chosen provider is not configured.
    """
    choice = env.get(PROVIDER_ENV, "").strip().lower()
    if choice == "none":
        return None
    if choice:
        if choice not in _PROVIDERS:
            raise UsageError(
                f"{PROVIDER_ENV}={choice!r} is not a search provider: use one of "
                f"{', '.join(_PROVIDERS)} or none"
            )
        variable, make = _PROVIDERS[choice]
        value = env.get(variable, "").strip()
        if not value:
            raise UsageError(f"{PROVIDER_ENV}={choice} needs {variable} to be set")
        return make(value)
    for variable, make in _PROVIDERS.values():
        value = env.get(variable, "").strip()
        if value:
            return make(value)
    return None


# ---------------------------------------------------------------------------------- pages

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/javascript", "application/ecmascript",
    "application/x-javascript", "application/yaml", "application/x-yaml", "application/toml",
    "application/x-sh", "application/sql", "application/graphql", "application/x-ndjson",
    "application/x-www-form-urlencoded", "application/rtf",
})  # fmt: skip
# Removed before conversion: code, styling, navigation and page furniture.
_NOISE_TAGS = (
    "script", "style", "noscript", "template", "nav", "footer", "aside", "form", "button",
    "input", "select", "textarea", "iframe", "svg", "canvas", "object", "embed", "dialog", "link",
    "meta",
)  # fmt: skip
_NOISE_ROLES = frozenset({"navigation", "contentinfo", "banner", "search", "complementary"})
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.I)
_BLANK_LINES_RE = re.compile(r"\n[ \t]*(?:\n[ \t]*){2,}")
_LANGUAGE_RE = re.compile(r"(?:language|lang)-([\w+#.-]+)")


def _kind(mime: str) -> str:
    """``html``, ``text``, ``binary`` or ``unknown`` (sniff the body) for a media type."""
    if not mime or mime == "application/octet-stream":  # often a mislabelled text file
        return "unknown"
    if mime in _HTML_TYPES:
        return "html"
    if mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml")):
        return "text"
    return "binary"


def _sniff(body: bytes) -> str:
    head = body[:2048]
    if b"\x00" in head and not head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "binary"
    start = head.lstrip()[:200].lower()
    if start.startswith((b"<!doctype html", b"<html")) or b"<body" in head.lower():
        return "html"
    return "text"


def _decode(body: bytes, charset: str | None, kind: str) -> str:
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if body.startswith(bom):
            return body.decode(encoding, "replace")
    if not charset and kind == "html":
        match = _META_CHARSET_RE.search(body[:4096])
        charset = match.group(1).decode("ascii") if match else None
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def _code_language(el: Any) -> str | None:
    for node in (el, el.find("code")):
        classes = node.get("class") if node is not None else None
        for cls in classes or ():
            match = _LANGUAGE_RE.match(cls)
            if match:
                return match.group(1)
    return None


def html_to_markdown(page: str, base_url: str = "") -> tuple[str, str]:
    """The title and the readable content of an HTML page as Markdown (CPU-bound: use a thread).

    Scripts, styles, navigation, footers, forms and other page furniture are dropped; headings,
    links (made absolute against ``base_url``), lists, code blocks and tables are kept; images
    become their alt text.
    """
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(page, "html.parser")
    title = _plain(soup.title.get_text()) if soup.title else ""
    for tag in soup.find_all(_NOISE_TAGS):
        tag.decompose()
    for tag in soup.find_all(role=True):
        if not tag.decomposed and str(tag.get("role", "")).lower() in _NOISE_ROLES:
            tag.decompose()
    for tag in soup.find_all(["header", "head"]):
        # a page's banner goes; an article's own header (its title, author) stays
        if not tag.decomposed and tag.find_parent(["article", "main"]) is None:
            tag.decompose()
    mains = soup.find_all("main")
    root: BeautifulSoup | Tag = mains[0] if len(mains) == 1 else (soup.body or soup)
    for a in root.find_all("a"):
        href = str(a.get("href") or "").strip()
        if not href or href.startswith(("#", "javascript:", "data:", "mailto:")):
            a.unwrap()
        else:
            a["href"] = urljoin(base_url, href) if base_url else href
    for img in root.find_all("img"):
        alt = _plain(img.get("alt"))
        if alt:
            img.replace_with(f"[image: {alt}]")
        else:
            img.decompose()
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        escape_asterisks=False,
        escape_underscores=False,
        code_language_callback=_code_language,
    )
    markdown = converter.convert_soup(root)
    markdown = "\n".join(line.rstrip() for line in markdown.splitlines())
    return title, _BLANK_LINES_RE.sub("\n\n", markdown).strip()


def _http_hint(status: int) -> str:
    if status in (401, 403):
        return "access denied (login needed or automated access blocked); use another source"
    if status in (404, 410):
        return "the page does not exist; check the URL or search for the right page"
    if status == 429:
        return "the site is rate limiting; wait, or use another source"
    if status >= 500:
        return "the server failed; try again later or use another source"
    return "the server refused the request; check the URL"


def _clip(text: str, start: int, max_chars: int) -> tuple[str, str]:
    """The part of ``text`` shown from ``start`` (cut near ``max_chars``) and a note about it."""
    total = len(text)
    if start >= total > 0:
        raise ToolError(f"start={start} is past the end of the page ({total} characters)")
    end = start + max_chars
    if end >= total:
        note = f"[Characters {start}-{total} of {total}: the end.]" if start else ""
        return text[start:], note
    newline = text.rfind("\n", start + max_chars * 4 // 5, end)
    if newline > start:
        end = newline
    note = (
        f"[Cut: characters {start}-{end} of {total} shown. "
        f"Call fetch_url with start={end} to read more.]"
    )
    return text[start:end], note


@dataclass(frozen=True, slots=True)
class _Page:
    """A downloaded page: its final URL, content type, kind (``_kind``), body (cut at
    ``max_bytes`` when ``cut``), charset, and whether a redirect led to it."""

    url: str
    mime: str
    kind: str
    body: bytes
    charset: str | None
    cut: bool
    redirected: bool


# ---------------------------------------------------------------------------------- address guard

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA = frozenset({
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
})  # fmt: skip
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
# A host whose every label is a number (decimal, octal or hex): the C resolver reads
# "2130706433", "0x7f.1" or "0177.0.0.1" as an IPv4 address; only dotted decimal is accepted.
_NUMERIC_HOST_RE = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*\.?$", re.I)
_HOST_NAME_RE = re.compile(r"^[a-z0-9_.-]+$", re.I)  # what a (punycode) host name can hold
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


# Why an address is refused, checked in this order; the first that matches is the reason.
_BLOCKED: tuple[tuple[Callable[[IPAddress], bool], str], ...] = (
    (lambda ip: ip in _METADATA, "the cloud metadata service"),
    (lambda ip: ip.is_unspecified, "the unspecified address (this machine)"),
    (lambda ip: ip.is_loopback, "a loopback address (this machine)"),
    (lambda ip: ip.is_link_local, "a link-local address"),
    (lambda ip: ip.is_multicast, "a multicast address"),
    (lambda ip: ip in _CGNAT, "a carrier-grade NAT address"),
    (lambda ip: ip.is_private, "a private-network address"),
    (lambda ip: ip.is_reserved, "a reserved address"),
    (lambda ip: not ip.is_global, "not a public address"),
)


def _why_blocked(ip: IPAddress) -> str | None:
    """Why ``fetch_url`` must not connect to ``ip`` by default, or None for a public address.

    An IPv6 address that carries an IPv4 address (IPv4-mapped, NAT64, 6to4) is judged by the
    IPv4 address it reaches."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            form, inner = embedded
            why = _why_blocked(inner)
            return f"{form}{inner}, {why}" if why else None
        if ip in _NAT64_LOCAL:
            return "a local-use NAT64 address"
        if ip.is_site_local:
            return "a site-local address"
    return next((why for matches, why in _BLOCKED if matches(ip)), None)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address reaches, with the name of its form, if it has one."""
    if ip.ipv4_mapped is not None:
        return "the IPv4-mapped form of ", ip.ipv4_mapped
    if ip in _NAT64:
        return "the NAT64 form of ", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "the 6to4 form of ", ip.sixtofour
    return None


class _Refused(OSError):
    """The address guard refused a host (aiohttp wraps it; ``fetch`` unwraps it)."""

    def __init__(self, host: str, why: str, address: str = "") -> None:
        super().__init__(f"{host} is {why}")
        self.host, self.why, self.address = host, why, address


class _AddressGuard:
    """Which hosts and addresses ``fetch_url`` may connect to (``Web(allow_hosts=...)``)."""

    def __init__(self, allow: Sequence[str]) -> None:
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in allow:
            if not isinstance(entry, str) or not entry.strip():
                raise UsageError(f"allow_hosts entries are host names or networks, not {entry!r}")
            item = entry.strip().lower()
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            if any(c in item for c in "/:@ "):
                raise UsageError(
                    f"allow_hosts entry {entry!r} is neither a host name (intranet.example) nor "
                    "an address or network (127.0.0.1, 10.0.0.0/8, ::1)"
                )
            names.add(item.rstrip("."))
        self.names = frozenset(names)
        self.networks = tuple(networks)

    def name_allowed(self, host: str) -> bool:
        return host.lower().rstrip(".") in self.names

    def refusal(self, ip: IPAddress) -> str | None:
        """Why ``ip`` is refused, or None when it is public or allowed."""
        if any(ip in net for net in self.networks):
            return None
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if mapped is not None and any(mapped in net for net in self.networks):
            return None
        return _why_blocked(ip)

    @staticmethod
    def message(url: str, host: str, why: str, address: str = "") -> str:
        resolved = f" (it resolves to {address})" if address and address != host else ""
        return (
            f"fetch_url refused {url}: {host}{resolved} is {why}. Pages on this machine, on "
            "private networks and cloud metadata are not fetched; use a public address. To allow "
            f"this host, create the capability with Web(allow_hosts=[{host!r}])."
        )


Lookup = Callable[..., Awaitable[list[tuple[Any, ...]]]]


class _GuardedResolver:
    """An aiohttp resolver that checks every address it returns: the connector connects only to
    addresses the guard has seen (one lookup, so DNS rebinding cannot slip in between)."""

    def __init__(self, guard: _AddressGuard, lookup: Callable[[], Lookup]) -> None:
        self._guard = guard
        self._lookup = lookup

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        infos = await self._lookup()(host, port, type=socket.SOCK_STREAM, family=family)
        allowed_name = self._guard.name_allowed(host)
        results: list[ResolveResult] = []
        for fam, _, proto, _, address in infos:
            if fam not in (socket.AF_INET, socket.AF_INET6):
                continue
            text = str(address[0])
            if fam == socket.AF_INET6 and len(address) > 3 and address[3]:
                text = f"{text.split('%', 1)[0]}%{address[3]}"
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                raise _Refused(host, "resolved to something that is not an IP address") from None
            why = None if allowed_name else self._guard.refusal(ip)
            if why:
                raise _Refused(host, why, text)
            results.append({
                "hostname": host, "host": text, "port": int(address[1]), "family": fam,
                "proto": proto, "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            })  # fmt: skip
        if not results:
            raise OSError(f"{host} has no IPv4 or IPv6 address")
        return results

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------------------------- capability


class Web(Capability):
    """Web tools: ``fetch_url`` always, ``web_search`` when a search provider is configured.

    - ``fetch_url`` downloads one http(s) page through the capability's pooled HTTP client
      (redirects followed up to ``max_redirects``, ``timeout`` seconds in all, at most ``max_bytes``
      read) and returns it as Markdown (HTML, converted in a thread without scripts, styles,
      navigation and footers) or as text (other text types); binary content is refused. The output
      is cut at ``max_chars`` and says where to continue (``start=``).
    - Where ``fetch_url`` may connect (the address guard): only to public addresses unless
      ``allow_hosts`` names the host or its network. Loopback, private, link-local (cloud metadata
      169.254.169.254), carrier-grade NAT, multicast, reserved and unspecified addresses, IPv6
      site-local and unique-local (metadata fd00:ec2::254), and the IPv4-mapped, NAT64 and 6to4
      forms of blocked IPv4 addresses are refused. A name is resolved once by the session's own
      resolver, which refuses it if any of its addresses is blocked and hands the connector exactly
      the addresses it checked (no second lookup that DNS rebinding could change). Redirects are
      followed by hand, each hop checked the same way; user names in URLs and legacy numeric host
      forms (``2130706433``, ``0x7f.1``, ``0177.0.0.1``) are refused.
    - ``web_search`` asks a ``SearchProvider`` and lists titles, URLs and snippets. It is offered
      only when a provider is configured, so the model is never given a tool that cannot work.

    Search providers: ``SearxngProvider`` (self-hosted, no key), ``TavilyProvider`` and
    ``BraveProvider`` (API keys, never shown in tool results, errors or logs). ``provider_from_env``
    picks one from the environment, in this order:

    1. ``AGENTICA_SEARCH_PROVIDER`` = ``searxng``, ``tavily``, ``brave`` or ``none``: that choice
       (its variable below must then be set);
    2. otherwise the first one configured of ``SEARXNG_URL``, ``TAVILY_API_KEY``, ``BRAVE_API_KEY``
       (the self-hosted engine first: no key, no cost, no queries sent to a third party);
    3. otherwise none (no ``web_search`` tool).

    Args:
        provider: the search engine; default: ``provider_from_env(env)``.
        env: the environment to read the provider from (default ``os.environ``; ``{}`` for no
            search unless ``provider`` is given).
        max_chars: characters ``fetch_url`` returns by default.
        max_chars_limit: the most characters the model may ask ``fetch_url`` for.
        max_bytes: the most bytes downloaded per page (reading stops there).
        timeout: seconds one page download may take, redirects included.
        max_redirects: redirects followed per page.
        user_agent: the ``User-Agent`` sent with page requests.
        allow_hosts: hosts ``fetch_url`` may reach although their addresses are not public: host
            names (``"intranet.example"``, ``"localhost"``: any address they resolve to) and
            addresses or networks (``"127.0.0.1"``, ``"10.0.0.0/8"``, ``"::1"``). By default
            loopback, private, link-local, cloud metadata and other non-public addresses are
            refused (see above).
    """

    name = "web"

    def __init__(
        self,
        *,
        provider: SearchProvider | None = None,
        env: Mapping[str, str] | None = None,
        max_chars: int = 8000,
        max_chars_limit: int = 40_000,
        max_bytes: int = 2_000_000,
        timeout: float = 20.0,
        max_redirects: int = 5,
        user_agent: str = "Mozilla/5.0 (compatible; agentica)",
        allow_hosts: Sequence[str] = (),
    ) -> None:
        if not 1 <= max_chars <= max_chars_limit:
            raise UsageError("max_chars must be at least 1 and at most max_chars_limit")
        if max_bytes < 1 or timeout <= 0 or max_redirects < 0:
            raise UsageError("max_bytes and timeout must be positive, max_redirects not negative")
        if provider is None:
            provider = provider_from_env(os.environ if env is None else env)
        self.provider = provider
        self.max_chars = max_chars
        self.max_chars_limit = max_chars_limit
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        if isinstance(allow_hosts, str):
            raise UsageError("allow_hosts is a list of host names or networks, not one string")
        self.allow_hosts = tuple(allow_hosts)
        self._guard = _AddressGuard(self.allow_hosts)
        # the DNS lookup the guarded resolver uses (the loop's getaddrinfo); tests script it
        self._getaddrinfo: Lookup | None = None
        self._pool = HttpClientPool(max_connections=64, resolver=self._make_resolver)
        self._tools = self._build_tools()

    def __repr__(self) -> str:
        return f"<Web search={self.provider!r}>"

    def _make_resolver(self) -> AbstractResolver:
        def lookup() -> Lookup:
            return self._getaddrinfo or asyncio.get_running_loop().getaddrinfo

        return cast("AbstractResolver", _GuardedResolver(self._guard, lookup))

    def _checked_url(self, raw: str) -> URL:
        """``raw`` as the URL that will be requested, if the guard lets it through.

        Names are checked again, with the addresses actually connected to, by the resolver."""
        from yarl import URL

        shown = raw[:200]
        try:
            url = URL(raw)
        except (ValueError, TypeError):
            raise ToolError(f"{shown!r} is not a valid URL") from None
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise ToolError(
                f"fetch_url only reads http:// and https:// URLs, not {shown!r}; "
                "give a full web address"
            )
        if url.raw_user is not None or url.raw_password is not None:
            raise ToolError(
                f"fetch_url refused {_display_url(raw)}: it does not send a user name or password "
                "in the URL; give the address without 'name@'"
            )
        host = url.raw_host
        name = host.rstrip(".")
        if (name == "localhost" or name.endswith(".localhost")) and not self._guard.name_allowed(
            host
        ):
            raise ToolError(_AddressGuard.message(shown, host, "this machine (localhost)"))
        if ":" not in host and not _HOST_NAME_RE.match(host):
            raise ToolError(
                f"fetch_url refused {shown}: {host!r} is not a valid host name; give the site's "
                "name as written in its address"
            )
        if ":" in host or _NUMERIC_HOST_RE.match(host):
            try:
                ip = ipaddress.ip_address(host)
            except ValueError:
                raise ToolError(
                    f"fetch_url refused {shown}: {host!r} is not a standard address (IPv4 "
                    "addresses are four decimal numbers like 93.184.216.34); give a host name "
                    "or a dotted-decimal address"
                ) from None
            why = self._guard.refusal(ip)
            if why:
                raise ToolError(_AddressGuard.message(shown, host, why))
        return url

    def tools(self) -> Sequence[ToolLike]:
        return self._tools

    async def aclose(self) -> None:
        """Close the HTTP sessions of the running loop (pages and the search provider)."""
        await self._pool.aclose()
        close = getattr(self.provider, "aclose", None)
        if callable(close):
            await close()

    # ------------------------------------------------------------------------------ operations

    async def fetch(self, url: str, *, max_chars: int | None = None, start: int = 0) -> str:
        """``fetch_url``'s work: the page at ``url`` as text for the model; ``ToolError`` if not."""
        url = url.strip()
        if "://" not in url and not urlsplit(url).scheme:
            url = "https://" + url
        trail = [self._checked_url(url)]
        limit = max(200, min(max_chars or self.max_chars, self.max_chars_limit))
        page = await self._download(url, trail)
        kind = page.kind
        if kind == "unknown":
            kind = _sniff(page.body)
            if kind == "binary":
                raise ToolError(_binary_message(page.url, "unlabelled binary"))
        title, content = await asyncio.to_thread(_readable, page.body, page.charset, kind, page.url)
        logger.debug("fetched %s: %d bytes, %d characters", page.url, len(page.body), len(content))
        header = self._page_header(page, url, title, kind)
        if not content:
            header.append("The page has no readable text (it may need JavaScript).")
            return "\n".join(header)
        shown, note = _clip(content, max(0, start), limit)
        return "\n".join(header) + "\n\n" + shown + (f"\n\n{note}" if note else "")

    async def _download(self, url: str, trail: list[URL]) -> _Page:
        """The page at ``trail[-1]``, following redirects (each hop checked like the first URL
        and appended to ``trail``), within ``timeout``; failures become ``ToolError``."""
        import aiohttp

        session = self._pool.session()
        try:
            async with asyncio.timeout(self.timeout):
                return await self._follow(session, url, trail)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._download_error(exc, url, trail[-1]) from None

    async def _follow(self, session: aiohttp.ClientSession, url: str, trail: list[URL]) -> _Page:
        headers = {
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        }
        while True:
            async with session.get(trail[-1], headers=headers, allow_redirects=False) as resp:
                location = resp.headers.get("Location")
                if resp.status not in _REDIRECTS or not location:
                    return await self._read_page(resp, redirected=len(trail) > 1)
                if len(trail) > self.max_redirects:
                    raise ToolError(
                        f"{url} redirected more than {self.max_redirects} times; the page cannot "
                        "be read"
                    )
                trail.append(self._next_hop(url, resp.url, location))

    async def _read_page(self, resp: aiohttp.ClientResponse, *, redirected: bool) -> _Page:
        """The body of a final (not redirecting) answer, if it is a page ``fetch_url`` reads."""
        final = str(resp.url)
        if resp.status >= 400:
            reason = f" {resp.reason}" if resp.reason else ""
            raise ToolError(f"HTTP {resp.status}{reason} for {final}: {_http_hint(resp.status)}")
        mime = resp.content_type.lower() if "Content-Type" in resp.headers else ""
        kind = _kind(mime)
        if kind == "binary":
            raise ToolError(_binary_message(final, mime))
        body, cut = await _read_capped(resp, self.max_bytes)
        if cut:
            resp.close()  # drop the connection rather than read the rest
        return _Page(final, mime, kind, body, resp.charset, cut, redirected)

    def _download_error(
        self, exc: aiohttp.ClientError | TimeoutError, url: str, target: URL
    ) -> ToolError:
        """What the model is told when the download of ``url`` failed at ``target``."""
        import aiohttp

        cannot = (
            f"cannot fetch {url}: {type(exc).__name__}: {exc}; check the address or use "
            "another source"
        )
        if isinstance(exc, aiohttp.ClientConnectorError):
            refused = exc.os_error
            if isinstance(refused, _Refused):
                return ToolError(
                    _AddressGuard.message(
                        _display_url(str(target)), refused.host, refused.why, refused.address
                    )
                )
            return ToolError(cannot)
        if isinstance(exc, aiohttp.InvalidURL):
            return ToolError(f"{url[:200]!r} is not a valid URL")
        if isinstance(exc, TimeoutError):
            return ToolError(
                f"{url} did not answer within {self.timeout:g} s; try again later or use "
                "another source"
            )
        return ToolError(cannot)

    def _page_header(self, page: _Page, url: str, title: str, kind: str) -> list[str]:
        """The lines before a page's text: its URL (and where it was redirected from), title,
        content type (of a text page) and a note when the download was cut."""
        header = [f"URL: {page.url}"]
        if page.redirected:
            header[0] += f" (redirected from {url})"
        if title:
            header.append(f"Title: {title}")
        if kind == "text" and page.mime:
            header.append(f"Content-Type: {page.mime}")
        if page.cut:
            header.append(
                f"Note: the download stopped after {self.max_bytes:,} bytes; the end of the "
                "page is missing."
            )
        return header

    def _next_hop(self, url: str, current: URL, location: str) -> URL:
        """Where a redirect from ``current`` leads, checked like the first URL."""
        from yarl import URL

        try:
            target = current.join(URL(location))
        except (ValueError, TypeError):
            raise ToolError(
                f"{url} redirected to {location[:200]!r}, which is not a valid URL"
            ) from None
        if target.scheme not in ("http", "https"):
            raise ToolError(f"{url} redirected to {location[:200]!r}, which is not an http(s) page")
        return self._checked_url(str(target))

    async def search(self, query: str, *, max_results: int = 5) -> str:
        """``web_search``'s work: the results as text for the model; ``ToolError`` if it fails."""
        if self.provider is None:
            raise ToolError("web search is not configured")
        query = query.strip()
        if not query:
            raise ToolError("the query is empty; say what to search for")
        n = max(1, min(max_results, _MAX_SEARCH_RESULTS))
        results = await self.provider.search(query, n)
        if not results:
            return f"No results for {query!r}. Try other words."
        lines = []
        for i, result in enumerate(results[:n], 1):
            lines.append(f"{i}. {result.title}\n   {result.url}")
            if result.snippet:
                lines.append(f"   {result.snippet}")
        return "\n".join(lines)

    # ------------------------------------------------------------------------------ tools

    def _build_tools(self) -> tuple[Function, ...]:
        web = self
        default_chars = self.max_chars

        async def fetch_url(url: str, max_chars: int = default_chars, start: int = 0) -> str:
            """Read a web page (http/https) as Markdown text.

            Args:
                url: the page's address.
                max_chars: the most characters to return.
                start: where to start reading (to continue a cut page).
            """
            return await web.fetch(url, max_chars=max_chars, start=start)

        async def web_search(query: str, max_results: int = 5) -> str:
            """Search the web; returns titles, URLs and snippets.

            Args:
                query: what to search for.
                max_results: how many results (1-10).
            """
            return await web.search(query, max_results=max_results)

        tools = [Function.from_callable(fetch_url)]
        if self.provider is not None:
            tools.append(Function.from_callable(web_search))
        return tuple(tools)


def _binary_message(url: str, mime: str) -> str:
    return (
        f"{url} is {mime} content, which fetch_url cannot read (it reads HTML and text pages "
        "only); look for an HTML or text version"
    )


def _readable(body: bytes, charset: str | None, kind: str, url: str) -> tuple[str, str]:
    """The title and text of a downloaded body (run in a thread)."""
    text = _decode(body, charset, kind)
    if kind == "html":
        return html_to_markdown(text, url)
    return "", text.strip()
