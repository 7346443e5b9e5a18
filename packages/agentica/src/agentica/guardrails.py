"""Guardrails on runs and on tool calls: the public names (implemented in ``tools/guardrails.py``).

```python
from agentica.guardrails import GuardrailOutput, tool_input_guardrail

@tool_input_guardrail(tools=["execute"])
def no_sudo(ctx, call):
    if "sudo" in call.arguments["command"]:
        return GuardrailOutput.reject("sudo is not allowed here; run the command without it")

agent = Agent(tools=[...], guardrails=[no_sudo])
```
"""

from agentica.tools.guardrails import (
    GuardrailOutput,
    InputGuardrail,
    OutputGuardrail,
    ToolCallInfo,
    ToolInputGuardrail,
    ToolOutputGuardrail,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
    tool_output_guardrail,
)

__all__ = [
    "GuardrailOutput",
    "InputGuardrail",
    "OutputGuardrail",
    "ToolCallInfo",
    "ToolInputGuardrail",
    "ToolOutputGuardrail",
    "input_guardrail",
    "output_guardrail",
    "tool_input_guardrail",
    "tool_output_guardrail",
]
