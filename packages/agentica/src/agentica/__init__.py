"""agentica: an async-first agent framework; its public surface is what this module exports.

```python
from agentica import Agent, tool

@tool
async def fetch(url: str) -> str:
    "Fetch a web page."  # ...

agent = Agent(tools=[fetch])  # the embedded local model; or model="deepseek:deepseek-chat"
print((await agent.run("Summarise example.org")).content)
```

The names are imported on first use (``import agentica`` alone is cheap: the CLI shows its
prompt before the agent stack is loaded).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentica.agent import Agent
    from agentica.context import ContextPolicy, HistoryPolicy
    from agentica.errors import (
        AgenticaError,
        ConcurrentRunError,
        GuardrailTripped,
        LimitExceeded,
        ModelError,
        OutputValidationError,
        RunCancelled,
        ToolError,
        UsageError,
    )
    from agentica.messages import RunUsage, Usage
    from agentica.models import (
        ByTask,
        Claude,
        Escalate,
        FallbackModel,
        LocalModel,
        ModelPrice,
        ModelRule,
        ModelSettings,
        OpenAIChat,
        OpenAILike,
        RetryPolicy,
    )
    from agentica.run import Handoff, RunLimits, RunResponse, RunStream
    from agentica.teams import Team
    from agentica.tools import (
        Function,
        FunctionCall,
        Retry,
        RunContext,
        StopRun,
        Tool,
        ToolSettings,
        tool,
    )

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgenticaError",
    "ByTask",
    "Claude",
    "ConcurrentRunError",
    "ContextPolicy",
    "Escalate",
    "FallbackModel",
    "Function",
    "FunctionCall",
    "GuardrailTripped",
    "Handoff",
    "HistoryPolicy",
    "LimitExceeded",
    "LocalModel",
    "ModelError",
    "ModelPrice",
    "ModelRule",
    "ModelSettings",
    "OpenAIChat",
    "OpenAILike",
    "OutputValidationError",
    "Retry",
    "RetryPolicy",
    "RunCancelled",
    "RunContext",
    "RunLimits",
    "RunResponse",
    "RunStream",
    "RunUsage",
    "StopRun",
    "Team",
    "Tool",
    "ToolError",
    "ToolSettings",
    "Usage",
    "UsageError",
    "__version__",
    "tool",
]

_EXPORTS = {
    "Agent": "agentica.agent",
    "AgenticaError": "agentica.errors",
    "ByTask": "agentica.models",
    "Claude": "agentica.models",
    "ConcurrentRunError": "agentica.errors",
    "ContextPolicy": "agentica.context",
    "Escalate": "agentica.models",
    "FallbackModel": "agentica.models",
    "Function": "agentica.tools",
    "FunctionCall": "agentica.tools",
    "GuardrailTripped": "agentica.errors",
    "Handoff": "agentica.run",
    "HistoryPolicy": "agentica.context",
    "LimitExceeded": "agentica.errors",
    "LocalModel": "agentica.models",
    "ModelError": "agentica.errors",
    "ModelPrice": "agentica.models",
    "ModelRule": "agentica.models",
    "ModelSettings": "agentica.models",
    "OpenAIChat": "agentica.models",
    "OpenAILike": "agentica.models",
    "OutputValidationError": "agentica.errors",
    "Retry": "agentica.tools",
    "RetryPolicy": "agentica.models",
    "RunCancelled": "agentica.errors",
    "RunContext": "agentica.tools",
    "RunLimits": "agentica.run",
    "RunResponse": "agentica.run",
    "RunStream": "agentica.run",
    "RunUsage": "agentica.messages",
    "StopRun": "agentica.tools",
    "Team": "agentica.teams",
    "Tool": "agentica.tools",
    "ToolError": "agentica.errors",
    "ToolSettings": "agentica.tools",
    "Usage": "agentica.messages",
    "UsageError": "agentica.errors",
    "tool": "agentica.tools",
}
"""Each public name and the module it lives in (imported when the name is first used)."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentica' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup finds it directly
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
