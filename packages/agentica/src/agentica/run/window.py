"""The context window of a run: token accounting, result eviction, compaction, forced answers.

Owns ``ContextWindow`` (the per-run object the loop asks before every model call), the session's
store of evicted results (``SessionResults``), the token counter loader and the default
summariser built from a model (``model_summarizer``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentica.context import (
    ContextBudget,
    ContextPolicy,
    EstimateCounter,
    MessageSizes,
    Summarizer,
    TokenCounter,
    compact,
    counter_for,
    preview,
    repair_tool_pairs,
    tool_pairs_ok,
)
from agentica.context.compaction import Compaction
from agentica.messages import Message, SystemMessage, ToolMessage, UserMessage
from agentica.models.base import Model, ModelRequest, ModelResponse, ModelSettings
from agentica.tools.call import FunctionCall

if TYPE_CHECKING:
    from agentica.messages import ToolDefinition

__all__ = [
    "FINAL_ANSWER_NOTE",
    "RESULTS_DIR",
    "RESULTS_STATE_KEY",
    "ContextWindow",
    "SessionResults",
    "load_counter",
    "model_summarizer",
]

RESULTS_STATE_KEY = "results"
"""The key of ``agent.memory.state`` holding evicted tool results (``{path: {"content",
"modified"}}``, the shape of a ``StateBackend``'s files; paths relative to ``RESULTS_DIR``)."""
RESULTS_DIR = "/.results"
"""Where evicted results appear to the file tools."""

FINAL_ANSWER_NOTE = (
    "The conversation is close to the context limit, so no more tools can be called. Give your "
    "final answer now, using what you found so far; say what is left undone, if anything."
)

SUMMARY_PROMPT = (
    "You compress the earlier part of an agent's work so it can continue with less context. "
    "Write a summary of at most {words} words of the transcript below: the task and decisions "
    "made, results found (numbers, names), file paths read or written, evidence references "
    "(such as [__ref: ...]), errors to avoid, and what is still to do. Plain sentences or short "
    "bullet points; no preamble."
)

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def load_counter(model: object) -> TokenCounter:
    """The most exact offline token counter for ``model``, loaded (blocking: reads files).

    A local model's GGUF file gives exact counts; OpenAI models get their tiktoken encoding;
    others (and any failure to load) the estimate.
    """
    model_id = str(getattr(model, "id", "") or "")
    provider = getattr(model, "provider", None)
    path = getattr(model, "weights_path", None) or getattr(model, "model_path", None)
    if path is not None and os.fspath(path).lower().endswith(".gguf"):
        model_id = os.fspath(path)
    try:
        counter = counter_for(model_id, provider if isinstance(provider, str) else None)
        load = getattr(counter, "load", None)
        if callable(load):
            load()
    except Exception:  # no tokenizer available offline: the estimate will do
        return EstimateCounter()
    return counter


def model_summarizer(
    model: Model,
    settings: ModelSettings | None = None,
    *,
    on_response: Callable[[ModelResponse], None] | None = None,
) -> Summarizer:
    """A summariser that asks ``model`` (for example a cheaper one than the agent's);
    ``on_response`` sees each reply (the run loop charges its usage to the run and its tree)."""

    async def summarize(text: str, budget_tokens: int) -> str:
        words = max(budget_tokens * 3 // 4, 20)
        request = ModelRequest(
            messages=[
                SystemMessage(content=SUMMARY_PROMPT.format(words=words)),
                UserMessage(content=text),
            ],
            settings=ModelSettings(temperature=0.0, max_tokens=budget_tokens).merged(settings),
        )
        response = await model.response(request)
        if on_response is not None:
            on_response(response)
        return response.message.content or ""

    summarize.__qualname__ = f"model_summarizer({model.provider}:{model.id})"  # for log lines
    return summarize


class SessionResults:
    """Evicted tool results in the session state, capped in number and bytes (oldest go first).

    They are saved with the session and deleted with it.
    """

    def __init__(self, files: dict[str, Any], *, max_files: int, max_bytes: int) -> None:
        self.files = files
        self.max_files = max_files
        self.max_bytes = max_bytes

    def save(self, call_id: str, tool: str, text: str) -> str | None:
        """Store ``text`` under a short stable name and return its path; ``None`` (nothing
        stored, nothing deleted) when ``text`` alone is larger than ``max_bytes``."""
        if _size(text) > self.max_bytes:
            return None
        name = f"{_SAFE_NAME.sub('_', tool)[:40] or 'tool'}-{_SAFE_NAME.sub('', call_id)[-10:]}"
        key = f"/{name}.txt"  # keys are paths inside RESULTS_DIR (a StateBackend's files)
        self.files.pop(key, None)
        self.files[key] = {"content": text, "modified": time.time()}
        self._enforce_caps()  # never deletes ``key``: it is the newest and fits alone
        return RESULTS_DIR + key

    def holds(self, path: str) -> bool:
        """Whether the result at ``path`` (as ``save`` returned it) is still stored."""
        return path.removeprefix(RESULTS_DIR) in self.files

    def _enforce_caps(self) -> None:
        def size(entry: Any) -> int:
            content = entry.get("content", "") if isinstance(entry, dict) else ""
            return _size(content) if isinstance(content, str) else 0

        total = sum(size(e) for e in self.files.values())
        while self.files and (len(self.files) > self.max_files or total > self.max_bytes):
            oldest = next(iter(self.files))
            total -= size(self.files.pop(oldest))


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


@dataclass(slots=True)
class Prepared:
    """The outcome of ``ContextWindow.prepare``: the compaction done (if any; its
    ``summary_error`` says when the summariser failed), the request's tokens and whether only a
    final answer may be given."""

    tokens: int
    compaction: Compaction | None
    final_only: bool


class ContextWindow:
    """One run's context management; built by ``open()``. It

    - counts the request (messages, this turn's system slots and the tool schemas) with the
      model's own tokenizer when one is available offline (``load_counter``), caching each
      message's size;
    - evicts a tool result larger than the policy's threshold before the model sees it: the full
      text goes to the session's result store (``SessionResults``, readable with ``read_file``
      at ``/.results/...`` when the agent has file tools) and the model gets a preview and the
      path; a result larger than the store's byte cap is not saved, and its note says so (a note
      never names a path that does not exist when the model reads it);
    - repairs the history (a call without a result gets a "cancelled" result, a result without
      its call is dropped) before every call and after every compaction;
    - compacts above the soft threshold down to the low watermark
      (``agentica.context.compaction``) with a summariser built from the agent's model
      (``model_summarizer``) or the policy's own;
    - above the hard threshold, asks for the final answer with no tools offered;
    - when the provider still rejects a request as too long (``ContextOverflowError``),
      compacts and lets the loop retry.
    """

    def __init__(
        self,
        policy: ContextPolicy,
        *,
        budget: ContextBudget | None,
        sizes: MessageSizes,
        summarizer: Summarizer | None,
        results: SessionResults | None,
        readable: bool,
    ) -> None:
        self.policy = policy
        self.budget = budget
        self.sizes = sizes
        self.summarizer = summarizer
        self.results = results
        self.readable = readable
        self._tool_tokens: dict[tuple[str, ...], int] = {}

    @classmethod
    async def open(
        cls,
        policy: ContextPolicy,
        model: Model,
        settings: ModelSettings,
        *,
        state: dict[str, Any] | None,
        readable: bool,
        on_summary: Callable[[ModelResponse], None] | None = None,
    ) -> ContextWindow:
        """The window for a run of ``model`` with ``settings``; ``state`` is the session state
        where evicted results are kept; ``readable`` whether the agent can read them back;
        ``on_summary`` sees the replies of the default summariser (its usage is the run's)."""
        window = getattr(model, "context_window", None)
        window = policy.window or (window if isinstance(window, int) else None)
        reserve = (
            policy.reserve_output
            or settings.max_tokens
            or (min(4096, window // 8) if window else 0)
        )
        budget = policy.budget(window, reserve)
        if budget is not None and (policy.compaction or policy.force_answer):
            counter = await asyncio.to_thread(load_counter, model)
        else:
            counter = EstimateCounter()  # only eviction thresholds need a count: an estimate
        results = None
        if state is not None and policy.eviction and readable:
            files = state.setdefault(RESULTS_STATE_KEY, {})
            if isinstance(files, dict):
                results = SessionResults(
                    files, max_files=policy.max_evicted, max_bytes=policy.max_evicted_bytes
                )
        summarizer = policy.summarizer or (
            model_summarizer(model, on_response=on_summary) if policy.summarize else None
        )
        return cls(
            policy, budget=budget, sizes=MessageSizes(counter), summarizer=summarizer,
            results=results, readable=readable,
        )  # fmt: skip

    # ---------------------------------------------------------------------------- accounting

    def tool_tokens(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens of the tool schemas of a request (counted once per set of tools)."""
        key = tuple(t.name for t in tools)
        cached = self._tool_tokens.get(key)
        if cached is None:
            text = json.dumps(
                [{"name": t.name, "description": t.description, "parameters": t.parameters}
                 for t in tools],
                ensure_ascii=False,
            )  # fmt: skip
            cached = self._tool_tokens[key] = self.sizes.counter.count_text(text) if tools else 0
        return cached

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        """Tokens of a request with ``messages`` and ``tools``."""
        return self.sizes.total(messages) + self.tool_tokens(tools)

    # ---------------------------------------------------------------------------- eviction

    def evict(self, calls: Sequence[FunctionCall]) -> None:
        """Replace each result above the eviction threshold by a preview (and a file path)."""
        if not self.policy.eviction:
            return
        limit = self.budget.evict if self.budget is not None else self.policy.evict_tokens
        counter = self.sizes.counter
        for call in calls:
            text = call.content_without_notes
            if len(text) < limit:  # fewer characters than tokens: surely under the limit
                continue
            tokens = counter.count_text(text)
            if tokens <= limit:
                continue
            shown = preview(text, self.policy.preview_chars)
            path = self.results.save(call.id, call.name, text) if self.results else None
            if path is not None:
                note = (
                    f"[The full result ({tokens} tokens, {len(text)} characters) was saved to "
                    f"{path}; read parts of it with read_file(path={path!r}, offset=..., "
                    "limit=...) or search it with grep. Older saved results are deleted when "
                    "newer ones need the room.]"
                )
            elif self.results is not None:
                note = (
                    f"[The result ({tokens} tokens, {_size(text)} bytes) was too long and was cut "
                    f"to this preview; it was not saved (saved results are capped at "
                    f"{self.results.max_bytes} bytes), so ask the tool for less of it if you "
                    "need more.]"
                )
            else:
                note = f"[The result ({tokens} tokens) was too long and was cut to this preview.]"
            call.replacement = f"{shown}\n{note}"

    async def _offload(self, message: ToolMessage) -> str | None:
        if self.results is None:
            return None
        if "was saved to " + RESULTS_DIR in message.content[-400:]:
            line = message.content.rsplit("\n", 1)[-1]  # already evicted: keep only its note
            saved = line.split("was saved to ", 1)[-1].split(";", 1)[0]
            if not self.results.holds(saved):  # deleted since, for newer ones: say so
                line = f"[Its saved copy {saved} was deleted to make room for newer results.]"
            return f"[{message.name} result: an older output]\n{line}"
        path = self.results.save(message.tool_call_id, message.name, message.content)
        if path is None:
            return None  # too large to keep: it becomes a stub that says so
        return (
            f"[The full {message.name} result was moved out of the conversation to save context; "
            f"it is in {path} (read_file to see it again).]"
        )

    # ---------------------------------------------------------------------------- compaction

    def repair(self, messages: list[Message]) -> list[Message]:
        """``messages`` with tool calls and results paired (the same list when already so)."""
        if not self.policy.repair or tool_pairs_ok(messages):
            return messages
        return repair_tool_pairs(messages)

    async def prepare(
        self,
        messages: list[Message],
        *,
        extra: Sequence[Message],
        tools: Sequence[ToolDefinition],
        pinned: Sequence[Message],
        overflow: bool = False,
    ) -> tuple[list[Message], Prepared]:
        """Repair and, if needed, compact ``messages`` before a model call.

        ``extra`` are this turn's slot messages and ``tools`` the offered tools (counted, not
        compacted). ``overflow``: the provider rejected the request as too long, compact now.
        """
        messages = self.repair(messages)
        base = self.sizes.total(extra) - self.sizes.fixed + self.tool_tokens(tools)
        tokens = base + self.sizes.total(messages)
        budget = self.budget
        policy = self.policy
        done: Compaction | None = None
        due = budget is not None and tokens > budget.soft
        if policy.compaction and (due or overflow):
            if budget is not None and tokens > budget.low:
                target = budget.low
            else:  # the provider counts more than we do: shrink by a third
                target = max(tokens * 2 // 3, 1)
            done = await compact(
                messages,
                target=target,
                sizes=self.sizes,
                base=base,
                pinned=pinned,
                keep_recent=policy.keep_recent,
                summary_tokens=min(policy.summary_tokens, max(budget.usable // 8, 64))
                if budget is not None
                else policy.summary_tokens,
                summarizer=self.summarizer,
                summarizer_input_tokens=policy.summarizer_input_tokens
                or max((budget.usable if budget else tokens) // 3, 256),
                summarize=policy.summarize,
                offload=self._offload,
            )
            messages = self.repair(done.messages)
            done.messages = messages
            tokens = base + self.sizes.total(messages)
            done.after = tokens
            self.sizes.forget([*messages, *extra])
        final_only = (
            budget is not None and policy.force_answer and tokens > budget.hard and bool(tools)
        )
        return messages, Prepared(tokens=tokens, compaction=done, final_only=final_only)
