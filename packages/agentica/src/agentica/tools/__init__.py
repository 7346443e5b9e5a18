"""Tools: the three layers (``Tool`` -> ``Function`` -> ``FunctionCall``) and their execution.

- ``Tool``: a named group of functions (toolkit.py)
- ``Function`` / ``@tool``: schema from signature, type hints and docstring, plus the entry point
  (function.py)
- ``FunctionCall``: one invocation with arguments, result, error and id (call.py)
- ``execute_calls`` / ``ToolSettings``: concurrent execution of a turn's calls (execution.py)
- ``RunContext``: what a tool may know about its run (context.py)
- ``StopRun`` / ``Retry``: control values a tool returns (control.py)
"""

from agentica.tools.call import FunctionCall, render_result
from agentica.tools.context import RunContext
from agentica.tools.control import Retry, StopRun
from agentica.tools.execution import ToolSettings, execute_calls, tool_thread_pool
from agentica.tools.function import ArgumentsError, Function, tool
from agentica.tools.toolkit import Tool, ToolLike, resolve_functions

__all__ = [
    "ArgumentsError",
    "Function",
    "FunctionCall",
    "Retry",
    "RunContext",
    "StopRun",
    "Tool",
    "ToolLike",
    "ToolSettings",
    "execute_calls",
    "render_result",
    "resolve_functions",
    "tool",
    "tool_thread_pool",
]
