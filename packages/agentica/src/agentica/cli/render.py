"""Readable terminal output for a run's event stream (rich).

Text streams as it arrives; each tool call shows as one line when it starts and one when it ends
(name, arguments, duration, the start of its result or error); a subagent's calls show indented
under its ``task`` call, prefixed with its kind; an answer a check sent back shows as one line
naming the check and what it asked; a call to another model than the last one names it; the run
ends with a summary line of turns, tool calls, tokens, cost and time.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from agentica.run.events import (
    AnswerSentBack,
    ModelRequestStarted,
    ReasoningDelta,
    RunCompleted,
    RunEvent,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from agentica.run.result import RunResponse

__all__ = ["EventPrinter", "summary_line"]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_line(response: RunResponse) -> str:
    usage = response.usage
    cost = "unknown cost" if usage.cost is None else f"${usage.cost:.4f}"
    return (
        f"{usage.requests} model calls · {usage.tool_calls} tool calls · "
        f"{usage.input_tokens} in / {usage.output_tokens} out tokens · {cost} · "
        f"{response.duration:.1f} s"
    )


def _call_line(event: ToolCallStarted | ToolCallCompleted) -> Text:
    call = event.call
    if isinstance(event, ToolCallStarted):
        return Text.assemble(
            ("→ ", "cyan"), (call.name, "bold cyan"), (f" {_clip(call.call.arguments, 120)}", "dim")
        )
    ok = call.status == "success"
    return Text.assemble(
        ("✓ " if ok else "✗ ", "green" if ok else "red"),
        (call.name, "bold"),
        (f" {call.duration:.2f}s ", "dim"),
        (_clip(call.content, 160), "" if ok else "red"),
    )


class EventPrinter:
    """Prints run events to a rich ``Console`` as they arrive."""

    def __init__(self, console: Console, *, show_reasoning: bool = False) -> None:
        self.console = console
        self.show_reasoning = show_reasoning
        self._in_text = False
        self._model = ""  # the model of the last call

    def _end_text(self) -> None:
        if self._in_text:
            self.console.print()
            self._in_text = False

    def _model_change(self, model: str) -> None:
        """A line naming the model of this call when it is not the last call's."""
        if model and self._model and model != self._model:
            self.console.print(Text(f"⇄ model {model}", style="dim cyan"))
        self._model = model or self._model

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta):
            self.console.print(event.text, end="", markup=False, highlight=False)
            self._in_text = True
        elif isinstance(event, ReasoningDelta) and self.show_reasoning:
            self.console.print(Text(event.text, style="dim italic"), end="")
            self._in_text = True
        elif isinstance(event, ModelRequestStarted):
            self._end_text()  # the text of one model reply per paragraph
            self._model_change(event.model)
        elif isinstance(event, ToolCallStarted | ToolCallCompleted):
            self._end_text()
            self.console.print(_call_line(event))
        elif isinstance(event, ToolProgress):
            self._end_text()
            sources, update = [event.source], event.update
            while isinstance(update, ToolProgress):  # a subagent's subagent
                sources.append(update.source)
                update = update.update
            if isinstance(update, ToolCallStarted | ToolCallCompleted):
                prefix = Text("  " * len(sources) + f"[{' > '.join(sources)}] ", style="magenta")
                self.console.print(Text.assemble(prefix, _call_line(update)))
        elif isinstance(event, AnswerSentBack):
            self._end_text()
            self.console.print(
                Text.assemble(
                    ("↺ ", "yellow"),
                    (event.source, "bold yellow"),
                    (" sent the answer back: ", "yellow"),
                    (_clip(event.message, 140), "dim"),
                )
            )
        elif isinstance(event, RunCompleted):
            self._end_text()
            if event.response.stop_reason == "paused":
                return  # calls wait for a decision: the caller asks and resumes
            if not event.response.content and event.response.output is None:
                self.console.print(Text("(the model gave no answer)", style="yellow"))
            self.console.print(Text(summary_line(event.response), style="dim"))
