"""Replies of the scripted benchmark server, chosen by the request's model name.

- ``fanout-N``: the first reply asks for N parallel ``fetch(i)`` calls, the second answers.
- ``chain-N``: N sequential single ``fetch(i)`` calls, then an answer.

Started as a separate process by ``benchmarks/run.py``:
``python -m agentica.testing --responder benchmarks.server:respond --latency 0.1``.
"""

from __future__ import annotations

from typing import Any

from agentica.messages import AssistantMessage, ToolCall


def _fetches(start: int, count: int) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[
            ToolCall(id=f"call_{start + i}", name="fetch", arguments=f'{{"i": {start + i}}}')
            for i in range(count)
        ]
    )


def respond(body: dict[str, Any]) -> Any:
    kind, _, number = str(body.get("model", "")).partition("-")
    n = int(number or 1)
    done = sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")
    if kind == "fanout":
        return _fetches(0, n) if done == 0 else f"fetched {done} items"
    if kind == "chain":
        return _fetches(done, 1) if done < n else f"chain of {done} done"
    return "unknown scenario"
