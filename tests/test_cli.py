"""``agentica run`` as a user runs it: a subprocess against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentica.messages import AssistantMessage, ToolCall
from agentica.testing import FakeOpenAIServer, HTTPFault

ROOT = Path(__file__).resolve().parent.parent


async def agentica_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def adder(body: dict[str, Any]) -> Any:
    if body["messages"][-1]["role"] == "tool":
        return f"The sum is {body['messages'][-1]['content']}."
    return AssistantMessage(
        tool_calls=[ToolCall(id="", name="add", arguments=json.dumps({"a": 2, "b": 40}))]
    )


async def test_run_streams_tool_calls_and_answer(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(adder)
    code, out, err = await agentica_cli(
        "run", "What is 2 + 40?", "--model", "fake", "--base-url", server.base_url,
        "--tool", "tests.cli_tools:add",
    )  # fmt: skip
    assert code == 0, err
    assert "→ add" in out and "✓ add" in out
    assert "The sum is 42." in out
    assert "2 model calls · 1 tool calls" in out
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["tools"][0]["function"]["name"] == "add"


async def test_a_provider_error_exits_1_with_the_typed_error(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(lambda body: HTTPFault(401, {"error": {"message": "bad key"}}))
    code, out, err = await agentica_cli(
        "run", "hi", "--model", "fake", "--base-url", server.base_url, "--api-key", "sk-secret"
    )
    assert code == 1
    assert "ModelAuthError" in err and "bad key" in err
    assert "sk-secret" not in out + err  # the key is never printed


async def test_a_bad_model_string_says_how_to_fix_it() -> None:
    env = {"AGENTICA_MODEL": "", "AGENTICA_BASE_URL": "", "MOONSHOT_API_KEY": ""}
    code, _, err = await agentica_cli("run", "hi", "--model", "nosuch:model", env=env)
    assert code == 2
    assert "unknown provider 'nosuch'" in err and "deepseek:deepseek-chat" in err
    code, _, err = await agentica_cli("run", "hi", "--model", "moonshot:kimi", env=env)
    assert code == 2 and "$MOONSHOT_API_KEY" in err


async def test_a_bad_tool_spec_is_a_usage_error() -> None:
    code, _, err = await agentica_cli(
        "run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--tool", "nope"
    )
    assert code == 2 and "module:function" in err
