"""Gateway overhead: ``uv run python benchmarks/team_gateway.py [--quick]``.

The same ``openai`` client sends ``--requests`` chat completions (default 1000; ``--quick``: 200),
one at a time, alternately straight to a scripted OpenAI-compatible server (``python -m
agentica.testing``, a process of its own) and through the team service's gateway (``agentica
serve`` on a SQLite file, another process; then on a local PostgreSQL cluster with fsync on,
unless ``--no-postgres`` or not installed) to that same server; JSON and streamed. The overhead is
the gateway's latency minus the direct latency (p50 and p99 of each). Then, in this process, the
steps of one gateway request are timed on their own (authentication, course lookup, the course's
model, reserve, settle, two audit records, counting the prompt) to show where the time goes, and
the writes together as the gateway makes them (the gateway_request record in the admission's
transaction, the model_call record in the settling's). Authentication and the caller's courses
are kept a few seconds by the service, so after the first request they cost nearly nothing.
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openai import AsyncOpenAI  # noqa: E402

from agentica.messages import UserMessage  # noqa: E402
from agentica.models.base import ModelRequest  # noqa: E402
from benchmarks.team_server import cpu_seconds, serve_process  # noqa: E402
from tests.postgres import throwaway_cluster, why_no_postgres  # noqa: E402

ASK = [{"role": "user", "content": "Write one sentence about CSS grid for a beginner."}]
KEY = "sk-bench-key-0123456789abcdef"


def respond(body: dict[str, Any]) -> str:
    """The scripted model's answer (a short paragraph, streamed one word per chunk)."""
    return "CSS grid lays out a page in rows and columns that you name and size yourself."


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if q == 0.5:
        return statistics.median(ordered) * 1000
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def _start_upstream() -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.testing", "--responder", "benchmarks.team_gateway:respond",
        stdout=asyncio.subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert line.startswith("PORT "), line
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


async def _provision(database: str, data_dir: Path, model_url: str) -> tuple[str, str, str]:
    """A teacher, a course on the scripted model (with a key and a price: ``gpt-4o-mini``),
    budgets on the course and its students, and one student: ``(course_id, user_id, token)``."""
    from agentica_team.principal import Principal
    from agentica_team.service import Team
    from agentica_team.settings import TeamSettings

    team = await Team.open(TeamSettings(database_url=database, data_dir=data_dir))
    try:
        accounts = team.accounts
        teacher = await accounts.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "bench")
        await accounts.update_course(
            course.id,
            actor=teacher.id,
            model="openai:gpt-4o-mini",
            model_base_url=model_url,
            model_api_key=KEY,
        )
        for scope in ("course", "student"):
            await team.budgets.set_budget(
                course.id, scope=scope, period="day", max_tokens=10**12, max_cost_micros=10**12
            )
        (student,) = await accounts.add_students(course, [("s@school.edu", "S")], actor=teacher.id)
        return course.id, student.user.id, student.token
    finally:
        await team.aclose()


async def _complete(client: AsyncOpenAI, model: str) -> float:
    started = time.perf_counter()
    reply = await client.chat.completions.create(model=model, messages=ASK)  # type: ignore[arg-type]
    assert reply.choices[0].message.content
    return time.perf_counter() - started


async def _stream(client: AsyncOpenAI, model: str) -> float:
    started = time.perf_counter()
    events = await client.chat.completions.create(
        model=model,
        messages=ASK,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    text = [c.choices[0].delta.content or "" async for c in events if c.choices]
    assert "".join(text)
    return time.perf_counter() - started


async def _start_bare_proxy(model_url: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.bare_proxy", model_url, stdout=asyncio.subprocess.PIPE,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert line.startswith("PORT "), line
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


async def measure(requests: int, backend: str, database: str, home: Path) -> None:
    """The overhead table and the breakdown on ``database`` (``home``: data directory)."""
    upstream, model_url = await _start_upstream()
    bare, bare_url = await _start_bare_proxy(model_url)
    try:
        course_id, user_id, token = await _provision(database, home, model_url)
        async with serve_process(database, home, token, "/v1/models") as (url, pid):

            def client(base_url: str, key: str) -> AsyncOpenAI:
                return AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)

            clients = {
                "direct": (client(model_url, KEY), "gpt-4o-mini"),
                "bare": (client(bare_url, KEY), "gpt-4o-mini"),
                "gateway": (client(f"{url}/v1", token), "bench"),
            }
            rows = []
            cpu = 0.0
            for kind, call in (("JSON", _complete), ("stream", _stream)):
                times: dict[str, list[float]] = {name: [] for name in clients}
                for _ in range(20):  # warm up every path
                    for client, model in clients.values():
                        await call(client, model)
                before = cpu_seconds(pid)
                for _ in range(requests):  # alternately: the machine's noise hits all alike
                    for name, (client, model) in clients.items():
                        times[name].append(await call(client, model))
                cpu += cpu_seconds(pid) - before
                rows.append((kind, times))
            for client, _model in clients.values():
                await client.close()
    finally:
        for process in (bare, upstream):
            process.send_signal(signal.SIGTERM)
            await process.wait()
    print(f"### {backend}\n\nGateway overhead, {requests} sequential requests of each kind "
          "(the same openai client, the same scripted upstream; ms). *Bare proxy*: uvicorn, "
          "a raw ASGI app and aiohttp forwarding the same requests (`benchmarks/bare_proxy.py`), "
          "the floor of any Python hop:\n")  # fmt: skip
    print("| kind | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | "
          "added p99 | bare proxy added p50 | bare proxy added p99 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, times in rows:
        d50, d99 = _ms(times["direct"], 0.5), _ms(times["direct"], 0.99)
        g50, g99 = _ms(times["gateway"], 0.5), _ms(times["gateway"], 0.99)
        b50, b99 = _ms(times["bare"], 0.5), _ms(times["bare"], 0.99)
        print(f"| {kind} | {d50:.2f} | {d99:.2f} | {g50:.2f} | {g99:.2f} | {g50 - d50:.2f} | "
              f"{g99 - d99:.2f} | {b50 - d50:.2f} | {b99 - d99:.2f} |")  # fmt: skip
    print(f"\nThe service's CPU per gateway request: {cpu / (2 * requests) * 1000:.2f} ms\n")
    await breakdown(home, database, course_id, user_id, token)


async def breakdown(home: Path, database: str, course_id: str, user_id: str, token: str) -> None:
    """Each step of a gateway request on its own, in this process (same database)."""
    from agentica_team.metering import count_prompt
    from agentica_team.service import Team
    from agentica_team.settings import TeamSettings

    team = await Team.open(TeamSettings(database_url=database, data_dir=home))
    try:
        course_model = await team.models.course_model(course_id)
        principal = await team.accounts.principal_for_token(token)
        request = ModelRequest(messages=[UserMessage(content=ASK[0]["content"])])
        counter = course_model.upstream.counter

        async def reserve_settle() -> None:
            held = await team.budgets.reserve(
                course_id=course_id, user_id=user_id, tokens=300, cost_micros=200
            )
            await team.budgets.settle(held, input_tokens=20, output_tokens=20, cost_micros=20)

        async def metered() -> None:
            """What a gateway call writes: the admission with the gateway_request record (one
            transaction), then the settling with the model_call record (one transaction)."""
            data = {"model": "bench", "instruction": ASK[0]["content"]}

            note = await team.audit.prepare(
                "gateway_request", actor_id=user_id, course_id=course_id, subject="gateway",
                data=data,
            )  # fmt: skip
            held = await team.budgets.reserve(
                course_id=course_id, user_id=user_id, tokens=300, cost_micros=200, along=note
            )
            settling = team.budgets.settling(
                held, input_tokens=20, output_tokens=20, cost_micros=20
            )
            await team.audit.record("model_call", actor_id=user_id, course_id=course_id,
                                    subject="gateway", data=data, along=settling)  # fmt: skip

        async def audit_two() -> None:
            data = {"model": "bench", "instruction": ASK[0]["content"]}
            await team.audit.record("gateway_request", actor_id=user_id, course_id=course_id,
                                    subject="gateway", data=data)  # fmt: skip
            await team.audit.record("model_call", actor_id=user_id, course_id=course_id,
                                    subject="gateway", data=data)  # fmt: skip

        async def count() -> None:
            count_prompt(request, counter, exact=True)

        team.models.config_ttl = 0.0  # measure the read, as after the TTL
        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("authenticate the token", lambda: team.accounts.principal_for_token(token)),
            ("the caller's courses", lambda: team.accounts.courses_of(principal)),
            ("the course's model (config read)", lambda: team.models.course_model(course_id)),
            ("count the prompt (tiktoken)", count),
            ("reserve + settle (2 transactions)", reserve_settle),
            ("2 audit records (gateway_request, model_call)", audit_two),
            ("all of it as a gateway call writes it (2 transactions)", metered),
        ]
        print("Where a gateway request's time goes (each step alone, 300 times; wall ms, and "
              "CPU ms of this process, its database threads included):\n")  # fmt: skip
        print("| step | p50 | p99 | CPU |")
        print("|---|---|---|---|")
        for name, step in steps:
            for _ in range(20):
                await step()
            times = []
            cpu = time.process_time()
            for _ in range(300):
                started = time.perf_counter()
                await step()
                times.append(time.perf_counter() - started)
            cpu = (time.process_time() - cpu) / 300 * 1000
            print(f"| {name} | {_ms(times, 0.5):.3f} | {_ms(times, 0.99):.3f} | {cpu:.3f} |")
    finally:
        await team.aclose()


async def run(requests: int, postgres: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="team-gateway-") as tmp:
        home = Path(tmp)
        await measure(requests, "SQLite", f"sqlite:///{home / 'team.db'}", home)
    if not postgres:
        return
    reason = why_no_postgres()
    if reason:
        print(f"PostgreSQL skipped: {reason}")
        return
    with (
        tempfile.TemporaryDirectory(prefix="team-gateway-pg-") as tmp,
        throwaway_cluster(durable=True) as cluster,
    ):
        url = cluster.create_database("gateway_bench")
        await measure(requests, "PostgreSQL (fsync on)", url, Path(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 requests of each kind")
    parser.add_argument("--requests", type=int, default=0)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    asyncio.run(run(args.requests or (200 if args.quick else 1000), not args.no_postgres))


if __name__ == "__main__":
    main()
