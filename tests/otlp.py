"""A collector for the tracing tests: OTLP/HTTP (protobuf) on 127.0.0.1, keeping the spans'
names as they arrive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Collector:
    """Where to send (``endpoint``) and what came (``requests``, ``names``)."""

    endpoint: str = ""
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [
            span.name
            for message in self.requests
            for resource in message.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@asynccontextmanager
async def otlp_collector() -> AsyncIterator[Collector]:
    collector = Collector()

    async def collect(request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        collector.requests.append(message)
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    collector.endpoint = f"http://127.0.0.1:{port}/v1/traces"
    try:
        yield collector
    finally:
        await runner.cleanup()
