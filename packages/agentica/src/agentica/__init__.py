"""agentica: an async-first agent framework; its public surface is what this module exports.

```python
from agentica import Agent, tool

@tool
async def fetch(url: str) -> str:
    "Fetch a web page."  # ...

agent = Agent(tools=[fetch])  # the embedded local model; or model="deepseek:deepseek-chat"
print((await agent.run("Summarise example.org")).content)
```
"""

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
    Claude,
    FallbackModel,
    LocalModel,
    ModelPrice,
    ModelSettings,
    OpenAIChat,
    OpenAILike,
    RetryPolicy,
)
from agentica.run import RunLimits, RunResponse, RunStream
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
    "Claude",
    "ConcurrentRunError",
    "ContextPolicy",
    "FallbackModel",
    "Function",
    "FunctionCall",
    "GuardrailTripped",
    "HistoryPolicy",
    "LimitExceeded",
    "LocalModel",
    "ModelError",
    "ModelPrice",
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
    "Tool",
    "ToolError",
    "ToolSettings",
    "Usage",
    "UsageError",
    "__version__",
    "tool",
]
