"""Tokens per runtime: ``uv run python benchmarks/team_runtimes.py``.

The same scripted event sequence goes through one agent session in each runtime (``serial``,
``batch``, ``lanes``) of the team service (SQLite; for lanes, commands on the server in
bubblewrap): the student asks for a sort; while the agent works (the scripted model takes 0.2 s
a call; in lanes a command runs) they write "wait, use merge sort instead" and ask what
``git status`` does. Every request the model receives is recorded; the tokens are counted with
the o200k tokenizer over each request's messages, tools and answer schema as sent, plus the
replies. Prints a markdown table: model calls, prompt and completion tokens, and the seconds
until all three messages were answered.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.context.tokenizers import counter_for  # noqa: E402
from agentica.messages import AssistantMessage  # noqa: E402
from agentica.testing import FakeOpenAIServer, call, tool_calls  # noqa: E402
from tests.team.server import client, serve_team, sqlite_settings  # noqa: E402
from tests.team.server import message_text as _text  # noqa: E402
from tests.team.test_sessions import make_class, new_session, read_events, send  # noqa: E402

ASK = "implement a sort for the numbers in data.txt"
CHANGE = "wait, use merge sort instead"
QUESTION = "what does git status do?"
SORT = "def sort(xs):\n    return sorted(xs)\n"
MERGE = "def merge_sort(xs):\n    return sorted(xs)\n"


def _agent(messages: list[dict[str, Any]]) -> AssistantMessage | str:
    """The serial and batch agent (file tools): writes the file each request asks for."""
    last = messages[-1]
    if last["role"] == "tool":
        return "Done: the file is written; git status lists the files you changed."
    said = _text(last)
    if "merge sort" in said:
        return tool_calls(call("write_file", path="/merge_sort.py", content=MERGE))
    if "sort" in said:
        return tool_calls(call("write_file", path="/sort.py", content=SORT))
    return "git status lists the files you changed and what is staged."


def _lane(messages: list[dict[str, Any]]) -> AssistantMessage | str:
    last = messages[-1]
    if last["role"] == "tool":
        for message in reversed(messages):
            for tool_call in message.get("tool_calls") or ():
                if tool_call["id"] == last.get("tool_call_id"):
                    if tool_call["function"]["name"] == "write_file":
                        return tool_calls(call("lane_done", summary="wrote /merge_sort.py"))
                    return "Started; I wait for it."
        return "ok"
    if "merge sort" in _text(last):
        return tool_calls(call("write_file", path="/merge_sort.py", content=MERGE))
    return tool_calls(call("start_command", command="sleep 30; echo sorted"))


def scripted(body: dict[str, Any]) -> AssistantMessage | str:
    messages = body["messages"]
    system = _text(messages[0])
    if "route a student's messages" in system:
        said = _text(messages[-1])
        if CHANGE in said:
            return json.dumps({"to": "interrupt", "lane": "L1", "intent": "", "answer": ""})
        if "git status" in said:
            answer = "git status lists the files you changed and what is staged."
            return json.dumps({"to": "answer", "lane": "", "intent": "", "answer": answer})
        return json.dumps({"to": "new_lane", "lane": "", "intent": "implement a sort",
                           "answer": ""})  # fmt: skip
    if "was interrupted" in system:
        return json.dumps({"intent": "implement merge sort", "cancel": ["op1"], "terminate": ""})
    if "You work on one task" in system:
        return _lane(messages)
    return _agent(messages)


def _count(model: FakeOpenAIServer) -> tuple[int, int, int]:
    """Model calls, prompt tokens and completion tokens of what ``model`` received."""
    counter = counter_for("gpt-4o-mini", "openai")
    load = getattr(counter, "load", None)
    if load is not None:
        load()
    prompt = completion = 0
    for body in model.requests:
        sent = {k: body.get(k) for k in ("messages", "tools", "response_format") if body.get(k)}
        prompt += counter.count_text(json.dumps(sent, ensure_ascii=False))
        reply = scripted(body)
        completion += counter.count_text(reply if isinstance(reply, str) else json.dumps(
            [c.arguments for c in reply.tool_calls]))  # fmt: skip
    return len(model.requests), prompt, completion


def _started(runtime: str) -> Any:
    def check(event: dict[str, Any]) -> bool:
        data = event["data"]
        if runtime == "lanes":
            return bool(data.get("kind") == "operation_started")
        return bool(data.get("event") == "run_started")

    return check


async def one(runtime: str, home: Path) -> tuple[int, int, int, float]:
    settings = sqlite_settings(home, agent_runtime=runtime, server_commands=runtime == "lanes")
    async with (
        FakeOpenAIServer(scripted, latency=0.2) as model,
        serve_team(settings) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            started = time.perf_counter()
            seqs = {(await send(ann, session_id, ASK))["seq"]}
            await read_events(ann, session_id, until=_started(runtime), timeout=60)
            seqs.add((await send(ann, session_id, CHANGE))["seq"])
            seqs.add((await send(ann, session_id, QUESTION))["seq"])
            ended: set[int] = set()

            def all_ended(event: dict[str, Any]) -> bool:
                if event["data"].get("event") == "run_ended":
                    ended.add(event["data"]["message_seq"])
                return seqs <= ended

            await read_events(ann, session_id, until=all_ended, timeout=120)
            seconds = time.perf_counter() - started
    calls, prompt, completion = _count(model)
    return calls, prompt, completion, seconds


async def main() -> None:
    runtimes = ["serial", "batch"] + (["lanes"] if shutil.which("bwrap") else [])
    print(
        "Tokens per runtime on the same event sequence (ask for a sort; while it works: "
        '"use merge sort instead" and a question); scripted model, 0.2 s a call:\n'
    )
    print("| runtime | model calls | prompt tokens | completion tokens | all answered (s) |")
    print("|---|---|---|---|---|")
    for runtime in runtimes:
        with tempfile.TemporaryDirectory(prefix=f"team-runtime-{runtime}-") as tmp:
            calls, prompt, completion, seconds = await one(runtime, Path(tmp))
        print(f"| {runtime} | {calls} | {prompt:,} | {completion:,} | {seconds:.1f} |")
    if "lanes" not in runtimes:
        print("\n(lanes skipped: bubblewrap is not installed)")


if __name__ == "__main__":
    asyncio.run(main())
