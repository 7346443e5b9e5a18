"""Test helpers, public API: scripted models and a scripted OpenAI-compatible server.

- ``ScriptedModel``: replays a script of replies and records every request
- ``FunctionModel``: replies with what a user function returns
- ``ToolCallingModel``: calls every tool with arguments generated from its schema
- ``text``, ``call``, ``tool_calls``, ``chunks``, ``model_error``: reply builders
- ``FakeOpenAIServer`` (``agentica.testing.openai_server``): the real wire format on 127.0.0.1
- ``FakeAnthropicServer`` (``agentica.testing.anthropic_server``): the same for Anthropic

Nothing in ``agentica`` imports this package.
"""

from agentica.testing.anthropic_server import FakeAnthropicServer
from agentica.testing.models import (
    FunctionModel,
    Reply,
    ScriptedModel,
    StreamReply,
    ToolCallingModel,
    call,
    chunks,
    example_value,
    model_error,
    text,
    tool_calls,
)
from agentica.testing.openai_server import (
    BadBody,
    FakeOpenAIServer,
    Hang,
    HTTPFault,
    TruncatedStream,
)

__all__ = [
    "BadBody",
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "FunctionModel",
    "HTTPFault",
    "Hang",
    "Reply",
    "ScriptedModel",
    "StreamReply",
    "ToolCallingModel",
    "TruncatedStream",
    "call",
    "chunks",
    "example_value",
    "model_error",
    "text",
    "tool_calls",
]
