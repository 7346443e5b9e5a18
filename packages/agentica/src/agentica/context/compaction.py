"""Compaction: keeping a growing conversation inside the model's context window.

Owns the policy (``ContextPolicy``, its thresholds in tokens ``ContextBudget``), message sizes
(``MessageSizes``) and ``compact()``, which cuts old tool results and summarises old turns. The
run layer applies them through ``agentica.run.window``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from agentica.context.tokens import TokenCounter
from agentica.errors import UsageError
from agentica.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage

__all__ = [
    "STEPS_HEADER",
    "SUMMARY_HEADER",
    "Compaction",
    "ContextBudget",
    "ContextPolicy",
    "MessageSizes",
    "Offload",
    "Summarizer",
    "compact",
    "is_summary",
    "preview",
    "transcript",
]

logger = logging.getLogger(__name__)

Summarizer: TypeAlias = Callable[[str, int], Awaitable[str]]
"""``(transcript, budget_tokens) -> summary``: summarises a transcript in at most that many
tokens."""

Offload: TypeAlias = Callable[[ToolMessage], Awaitable[str | None]]
"""Moves a tool result out of the conversation (e.g. into a file) and returns the stub text the
model sees instead, or ``None`` when it cannot."""

SUMMARY_HEADER = "Summary of the earlier steps of this conversation (compacted to save context):"
STEPS_HEADER = "Steps taken (oldest first; each call with the first line of its result):"

_STUB_TOKENS = 40  # results this small are not worth cutting
_OLD_PREVIEW_CHARS = 300  # what stays of an old result (its first lines, its last) when cut
_RECENT_PREVIEW_CHARS = 600  # ... and of a recent one, when even recent turns are cut
_MIN_PREVIEW_CHARS = 64  # a shorter preview is not worth keeping: the note alone
_TRANSCRIPT_RESULT_CHARS = 1500  # a tool result's share of the summariser's transcript


@dataclass(slots=True, frozen=True, kw_only=True)
class ContextPolicy:
    """How a run keeps its conversation inside the context window.

    Two thresholds, as fractions of the usable window (the window minus the tokens reserved
    for the reply): above the **soft** threshold (default 0.6) the conversation is compacted
    (``compact()``) until it is below a **low watermark** (default ``soft - (hard - soft)``,
    0.4); above the **hard** threshold (default 0.8), even after compaction, the run stops
    calling tools and the model is asked for its final answer with what it knows.

    The gap between where compaction starts and where it stops is the hysteresis: after a
    compaction the conversation has room to grow again before the next one, so compaction does
    not fire on every step. With ``hysteresis=False`` the policy is a single threshold (compact
    just below it), kept for comparison: it compacts on almost every step once the
    conversation reaches it.

    Attributes:
        soft: compact when the request exceeds this fraction of the usable window.
        hard: above this fraction (after compaction) stop calling tools and answer.
        low: the watermark compaction aims for; default ``soft - (hard - soft)``, at least
            ``soft / 2``.
        hysteresis: ``False`` for a single threshold (``soft == hard``, compact to just below
            it); for comparisons, it oscillates.
        window: the context window in tokens (default: the model's ``context_window``; without
            one, only eviction and repair work).
        reserve_output: tokens kept free for the reply (default: ``max_tokens`` of the model
            settings, else an eighth of the window, at most 4,096).
        evict_tokens: a tool result larger than this many tokens is evicted (moved to a file
            the agent can read, or cut to a preview) before the model sees it.
        evict_fraction: ... or larger than this fraction of the usable window.
        preview_chars: characters of an evicted result kept in the conversation.
        keep_recent: the most recent turns (tool-call groups) that compaction leaves whole
            unless nothing else is left to compact.
        summary_tokens: the budget of a summary message (at most an eighth of the usable
            window).
        summarizer_input_tokens: the most tokens sent to the summariser in one call (default: a
            third of the usable window).
        summarizer: the summariser; default: the agent's model (``agentica.run`` builds it).
        max_evicted: evicted results kept per session (the oldest are deleted beyond it).
        max_evicted_bytes: their total size per session.
        eviction, compaction, summarize, force_answer, repair, overflow_retry: switch each
            mechanism off (for ablations); ``ContextPolicy.off()`` switches off all of them.
        max_overflow_retries: retries of a request the provider rejected as too long (each
            after a compaction).
    """

    soft: float = 0.6
    hard: float = 0.8
    low: float | None = None
    hysteresis: bool = True
    window: int | None = None
    reserve_output: int | None = None
    evict_tokens: int = 20_000
    evict_fraction: float = 0.5
    preview_chars: int = 2_000
    keep_recent: int = 2
    summary_tokens: int = 600
    summarizer_input_tokens: int | None = None
    summarizer: Summarizer | None = None
    max_evicted: int = 50
    max_evicted_bytes: int = 8_000_000
    eviction: bool = True
    compaction: bool = True
    summarize: bool = True
    force_answer: bool = True
    repair: bool = True
    overflow_retry: bool = True
    max_overflow_retries: int = 2

    def __post_init__(self) -> None:
        for name in ("soft", "hard"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise UsageError(f"ContextPolicy {name}={value}: give a fraction in (0, 1]")
        if self.hysteresis and not self.soft < self.hard:
            raise UsageError(
                f"ContextPolicy soft={self.soft} must be below hard={self.hard}: compaction starts "
                "at soft and the answer is forced at hard (for a single threshold pass "
                "hysteresis=False with soft == hard)"
            )
        if not self.hysteresis and self.soft != self.hard:
            raise UsageError(
                f"ContextPolicy(hysteresis=False) is a single threshold: soft ({self.soft}) and "
                f"hard ({self.hard}) must be equal; use ContextPolicy.single({self.soft})"
            )
        if self.low is not None and not 0.0 < self.low <= self.soft:
            raise UsageError(
                f"ContextPolicy low={self.low} must be in (0, soft={self.soft}]: compaction "
                "stops at the low watermark"
            )
        positive = ("evict_tokens", "preview_chars", "summary_tokens", "max_evicted")
        for name in positive:
            if getattr(self, name) < 1:
                raise UsageError(f"ContextPolicy {name} must be positive")
        if self.keep_recent < 0 or self.max_overflow_retries < 0:
            raise UsageError("ContextPolicy keep_recent and max_overflow_retries must be >= 0")
        if not 0.0 < self.evict_fraction <= 1.0:
            raise UsageError(f"ContextPolicy evict_fraction={self.evict_fraction}: not in (0, 1]")

    @classmethod
    def single(cls, threshold: float, **options: object) -> ContextPolicy:
        """A single-threshold policy (no hysteresis), for comparison."""
        return cls(soft=threshold, hard=threshold, hysteresis=False, **options)  # type: ignore[arg-type]

    @classmethod
    def off(cls) -> ContextPolicy:
        """No context management at all: no eviction, compaction, forced answer or repair."""
        return cls(
            eviction=False, compaction=False, summarize=False, force_answer=False,
            repair=False, overflow_retry=False,
        )  # fmt: skip

    @property
    def low_watermark(self) -> float:
        """The fraction compaction aims for."""
        if self.low is not None:
            return self.low
        if not self.hysteresis:
            return self.soft
        return max(self.soft - (self.hard - self.soft), self.soft / 2)

    def budget(self, window: int | None, reserve: int) -> ContextBudget | None:
        """The thresholds in tokens for a model with ``window`` (``None``: unknown window)."""
        window = self.window or window
        if window is None or window <= 0:
            return None
        usable = max(window - reserve, window // 4)
        low = int(usable * self.low_watermark)
        if not self.hysteresis:
            low = max(int(usable * self.soft) - 1, 1)
        return ContextBudget(
            window=window,
            usable=usable,
            soft=int(usable * self.soft),
            hard=int(usable * self.hard),
            low=low,
            evict=min(self.evict_tokens, max(int(usable * self.evict_fraction), 1)),
        )


@dataclass(slots=True, frozen=True)
class ContextBudget:
    """A policy's thresholds in tokens for one model: ``usable = window - reserved output``."""

    window: int
    usable: int
    soft: int
    hard: int
    low: int
    evict: int


class MessageSizes:
    """Token sizes of messages for one counter, each message counted once (cached by identity).

    The cache holds the messages it measured, so an id is never reused while cached; messages
    are treated as immutable (compaction makes new ones).
    """

    __slots__ = ("_cache", "counter", "fixed")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.fixed = counter.count_messages(())
        self._cache: dict[int, tuple[Message, int]] = {}

    def size(self, message: Message) -> int:
        """Tokens ``message`` adds to a request."""
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        size = self.measure(message)
        self._cache[id(message)] = (message, size)
        return size

    def measure(self, message: Message) -> int:
        """``size(message)`` without caching it (for a candidate that may not be kept)."""
        count_one = getattr(self.counter, "count_message", None)
        if callable(count_one):
            return int(count_one(message))
        return max(self.counter.count_messages((message,)) - self.fixed, 0)

    def total(self, messages: Sequence[Message]) -> int:
        """Tokens of a request made of ``messages`` (the fixed part included)."""
        return self.fixed + sum(self.size(m) for m in messages)

    def forget(self, keep: Collection[Message]) -> None:
        """Drop cached sizes of messages not in ``keep`` (call after a compaction)."""
        alive = {id(m) for m in keep}
        for key in [k for k in self._cache if k not in alive]:
            del self._cache[key]


@dataclass(slots=True)
class Compaction:
    """What one ``compact()`` call did.

    Attributes:
        messages: the compacted conversation.
        before, after: its tokens (with the caller's ``base``) before and after.
        trimmed: tool results moved out or cut to a stub.
        summarized: messages replaced by the summary.
        summarizer_calls: calls of the summariser (0 when the digest was used or nothing was
            summarised).
        reached: whether ``after`` is at or below the target.
        summary_error: why the summariser failed (``"ExceptionType: message"``, one line,
            credentials masked), ``None`` when it did not; the summary then holds only its
            step log (the earlier summaries' prose is dropped).
    """

    messages: list[Message]
    before: int
    after: int
    trimmed: int = 0
    summarized: int = 0
    summarizer_calls: int = 0
    reached: bool = True
    summary_error: str | None = None


def preview(text: str, chars: int) -> str:
    """``text`` cut to about ``chars`` characters: its start and its end, with what was left out."""
    if len(text) <= chars:
        return text
    head = chars * 2 // 3
    tail = chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail :]}"


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary ``compact()`` made."""
    return isinstance(message, SystemMessage) and message.content.startswith(SUMMARY_HEADER)


def _short(value: str, limit: int) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 3] + "..."


def transcript(messages: Sequence[Message], *, result_chars: int = _TRANSCRIPT_RESULT_CHARS) -> str:
    """``messages`` as a plain transcript for the summariser (long results cut)."""
    lines: list[str] = []
    for message in messages:
        if is_summary(message):
            assert isinstance(message, SystemMessage)
            body = message.content[len(SUMMARY_HEADER) :].strip()
            lines.append(f"[summary of earlier steps]\n{body}")
        elif isinstance(message, SystemMessage):
            lines.append(f"[note] {message.content}")
        elif isinstance(message, UserMessage):
            lines.append(f"[user] {message.text}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                lines.append(f"[assistant] {message.content}")
            for call in message.tool_calls:
                lines.append(f"[assistant calls {call.name}] {call.arguments}")
        else:
            status = "error from" if message.is_error else "result of"
            lines.append(f"[{status} {message.name}] {preview(message.content, result_chars)}")
    return "\n".join(lines)


def _call_line(call_name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
        items = parsed.items() if isinstance(parsed, dict) else ()
        args = ", ".join(f"{k}={v!r}" for k, v in items)
    except ValueError:
        args = arguments
    return f"{call_name}({_short(args, 120)})"


def _step_lines(messages: Sequence[Message]) -> list[str]:
    """One line per user message, assistant text and tool call (with its result's first line)."""
    lines: list[str] = []
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"- user: {_short(message.text, 200)}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                lines.append(f"- assistant: {_short(message.content, 200)}")
            for call in message.tool_calls:
                result = results.get(call.id)
                outcome = "no result"
                if result is not None:
                    first = next((ln for ln in result.content.splitlines() if ln.strip()), "")
                    outcome = ("error: " if result.is_error else "") + _short(first, 120)
                lines.append(f"- called {_call_line(call.name, call.arguments)} -> {outcome}")
    return lines


def _split_summary(message: SystemMessage) -> tuple[str, list[str]]:
    """A summary message's prose and its step log."""
    body = message.content[len(SUMMARY_HEADER) :].strip()
    prose, marker, steps = body.partition(STEPS_HEADER)
    return prose.strip(), [ln for ln in steps.strip().splitlines() if ln.strip()] if marker else []


def _fit_steps(lines: list[str], budget: int, counter: TokenCounter) -> str:
    """The step log within ``budget`` tokens: the oldest steps give way first."""
    text = "\n".join(lines)
    if counter.count_text(text) <= budget:
        return text
    costs = [counter.count_text(line) + 1 for line in lines]
    total = sum(costs)
    start = 0
    while start < len(lines) and total + 12 > budget:  # 12: the "earlier steps" line
        total -= costs[start]
        start += 1
    kept = lines[start:]
    return "\n".join([f"- ({start} earlier steps not listed)", *kept]) if kept else ""


def _fit_text(text: str, budget: int, counter: TokenCounter) -> str:
    """``text`` cut (at the end) to at most ``budget`` tokens."""
    tokens = counter.count_text(text)
    if tokens <= budget:
        return text
    note = "\n[... cut to fit the summary budget]"
    room = budget - counter.count_text(note)
    if room <= 0:  # not even the note fits: the text cut bare
        note, room = "", max(budget, 0)
    chars = len(text)
    for _ in range(12):  # shrink proportionally; converges in a few steps
        chars = int(chars * room / max(tokens, 1) * 0.95)
        tokens = counter.count_text(text[:chars])
        if tokens <= room:
            break
    else:
        chars = 0
    if not chars:
        return note.strip()
    return text[:chars] + note


def _groups(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages in groups: an assistant message with the results of its calls; others alone."""
    groups: list[list[Message]] = []
    for message in messages:
        if isinstance(message, ToolMessage) and groups and groups[-1][0].role == "assistant":
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _stub(message: ToolMessage, tokens: int, *, partial: bool = False) -> str:
    what = "the rest of the" if partial else "the"
    return (
        f"[{what} {message.name or 'tool'} result ({tokens} tokens) was removed to save context; "
        "call the tool again if you need it]"
    )


async def _summarize_chunks(
    text: str,
    summarizer: Summarizer,
    *,
    budget: int,
    input_tokens: int,
    counter: TokenCounter,
    context: str = "",
) -> tuple[str, int]:
    """A rolling summary of ``text``: chunks that fit ``input_tokens`` with the summary so far.

    ``context`` (the task) leads every chunk, cut to a quarter of the input, so the summariser
    knows what matters.
    """
    if context:
        context = _fit_text(context, max(input_tokens // 4, 16), counter)
        context = f"[the task, for context: it stays in the conversation]\n{context}\n\n"
    room = max(input_tokens - budget - counter.count_text(context), 64)
    lines = text.split("\n")
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count_text(line) + 1
        if cost > room:  # one line longer than a chunk: cut it
            line = _fit_text(line, room - 1, counter)
            cost = room
        if used + cost > room and current:
            chunks.append("\n".join(current))
            current, used = [], 0
        current.append(line)
        used += cost
    if current:
        chunks.append("\n".join(current))
    summary = ""
    for chunk in chunks:
        source = f"[summary of earlier steps]\n{summary}\n{chunk}" if summary else chunk
        source = f"{context}{source}"
        summary = _fit_text((await summarizer(source, budget)).strip(), budget, counter)
    return summary, len(chunks)


def _summarizer_name(summarizer: Summarizer) -> str:
    """A summariser's name for a log line: its qualified name, else its ``repr``."""
    name = getattr(summarizer, "__qualname__", None)
    return name if isinstance(name, str) and name else repr(summarizer)


@functools.cache
def _credential() -> re.Pattern[str]:
    """What looks like a credential in an error message (compiled when first needed: only a
    failing summariser's error is masked)."""
    return re.compile(
        r"(?i)((?:\b[\w-]*(?:key|token|secret|password|passwd|authorization|credentials?)[\"']?"
        r"\s*[=:]\s*[\"']?)(?:(?:bearer|basic)\s+)?|\b(?:bearer|basic)\s+)[^\s\"',;&]+"
        r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"
    )


def _error_text(error: BaseException, limit: int = 300) -> str:
    """``"ExceptionType: message"`` for reports: one line, at most ``limit`` characters, with
    what looks like a credential (``api_key=...``, ``Bearer ...``, ``sk-...``) masked."""
    message = _credential().sub(lambda m: f"{m.group(1) or ''}***", " ".join(str(error).split()))
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return _short(text, limit)


async def _prose(
    source: Sequence[Message],
    *,
    task: Sequence[Message],
    room: int,
    summarizer: Summarizer,
    input_tokens: int,
    counter: TokenCounter,
    result: Compaction,
) -> str:
    """The summariser's prose about ``source`` in ``room`` tokens; ``""`` when it fails.

    A failing summariser does not fail the run: the summary keeps only its step log. The
    failure is recorded in ``result.summary_error`` and logged as a warning.
    """
    try:
        prose, calls = await _summarize_chunks(
            transcript(source),
            summarizer,
            budget=room,
            input_tokens=input_tokens,
            counter=counter,
            context=transcript(task),
        )
    except Exception as error:
        result.summary_error = _error_text(error)
        logger.warning(
            "compaction: the summariser %s failed (%s); the summary keeps only the step log",
            _summarizer_name(summarizer),
            result.summary_error,
        )
        return ""
    result.summarizer_calls = calls
    return prose


async def _summary_text(
    previous: Sequence[Message],
    covered: Sequence[Message],
    *,
    task: Sequence[Message],
    budget: int,
    summarizer: Summarizer | None,
    input_tokens: int,
    counter: TokenCounter,
    result: Compaction,
) -> str:
    """The body of a summary of ``previous`` summaries and the ``covered`` messages.

    Two parts: the summariser's prose (what was decided and found, what remains), and a
    deterministic step log (each call with the first line of its result) that keeps paths and
    findings even when the summariser drops them; the log gets up to two thirds of the budget.
    Without a summariser, the earlier summaries' prose is kept (cut to fit).
    """
    prose_before: list[str] = []
    steps: list[str] = []
    for message in previous:
        assert isinstance(message, SystemMessage)
        prose, lines = _split_summary(message)
        prose_before += [prose] if prose else []
        steps += lines
    steps += _step_lines(covered)
    log = _fit_steps(steps, budget * 2 // 3, counter)
    room = budget - counter.count_text(f"{log}\n{STEPS_HEADER}") - 8
    prose = ""
    if summarizer is not None and room >= 32:
        source = [SystemMessage(content=f"{SUMMARY_HEADER}\n{p}") for p in prose_before]
        prose = await _prose(
            [*source, *covered], task=task, room=room, summarizer=summarizer,
            input_tokens=input_tokens, counter=counter, result=result,
        )  # fmt: skip
    elif prose_before and room > 0:
        prose = _fit_text("\n".join(prose_before), room, counter)
    text = f"{prose}\n\n{STEPS_HEADER}\n{log}" if prose else f"{STEPS_HEADER}\n{log}"
    return _fit_text(text, budget, counter)


def _leading_system(messages: Sequence[Message]) -> int:
    """How many system messages lead ``messages``."""
    head = 0
    while head < len(messages) and isinstance(messages[head], SystemMessage):
        head += 1
    return head


def _old_and_recent(
    groups: Sequence[Sequence[Message]], pinned_ids: Collection[int], keep_recent: int
) -> tuple[list[int], list[int]]:
    """The indexes of the old groups (compacted first; pinned ones never) and of the recent
    ones: the last ``keep_recent`` tool turns and everything after the first of them."""
    assistant_groups = [i for i, g in enumerate(groups) if g[0].role == "assistant"]
    first_recent = len(groups)
    if keep_recent and assistant_groups:
        first_recent = assistant_groups[max(len(assistant_groups) - keep_recent, 0)]
    recent = list(range(first_recent, len(groups)))
    old = [
        i
        for i, group in enumerate(groups[:first_recent])
        if not any(id(m) in pinned_ids for m in group)
    ]
    return old, recent


@dataclass(slots=True, kw_only=True)
class _Compactor:
    """One ``compact()`` call at work: the message groups as they are cut and their tokens."""

    groups: list[list[Message]]
    sizes: MessageSizes
    target: int
    total: int
    result: Compaction
    offload: Offload | None

    @property
    def over(self) -> bool:
        """Whether the conversation is still above the target."""
        return self.total > self.target

    def messages(self) -> list[Message]:
        """The groups' messages, in order."""
        return [m for group in self.groups for m in group]

    async def trim(self, indexes: Sequence[int], *, keep_chars: int) -> None:
        """Cut the results in these groups, in order, until the target is met: each to a
        preview of ``keep_chars`` (none: a stub) and a note (the offload's, else a stub's)."""
        for i in indexes:
            group = self.groups[i]
            for j, message in enumerate(group):
                if not self.over:
                    return
                if isinstance(message, ToolMessage):
                    replacement = await self._cut(message, keep_chars)
                    if replacement is not None:
                        group[j] = replacement

    async def _cut(self, message: ToolMessage, keep_chars: int) -> ToolMessage | None:
        """The cut version of ``message`` (counted in), or ``None`` if it would not save.

        The preview keeps at most half of the result, and is halved again while the cut would
        not save tokens (its note costs some): a result not much longer than ``keep_chars`` is
        cut too. A preview shorter than ``_MIN_PREVIEW_CHARS`` is dropped: the note stays alone."""
        cost = self.sizes.size(message)
        if cost <= _STUB_TOKENS:
            return None
        text = await self.offload(message) if self.offload is not None else None
        keep_chars = min(keep_chars, len(message.content) // 2)
        while True:
            if keep_chars < _MIN_PREVIEW_CHARS:
                keep_chars = 0
            note = text if text is not None else _stub(message, cost, partial=keep_chars > 0)
            if keep_chars:
                note = f"{preview(message.content, keep_chars)}\n{note}"
            replacement = ToolMessage(
                tool_call_id=message.tool_call_id,
                name=message.name,
                content=note,
                is_error=message.is_error,
            )
            saved = cost - self.sizes.measure(replacement)
            if saved > 0 or not keep_chars:
                break
            keep_chars //= 2
        if saved <= 0:
            return None
        self.total -= saved
        self.result.trimmed += 1
        return replacement

    def oldest(self, old: Sequence[int], cost: int, freed: int) -> tuple[list[int], int]:
        """The oldest of the ``old`` groups whose replacement by a summary message of at most
        ``cost`` tokens meets the target (at least one; all of them when even that does not),
        and the tokens freed with them (``freed``: what goes anyway, the rolled-in summaries)."""
        chosen: list[int] = []
        for i in old:
            if chosen and self.total - freed + cost <= self.target:
                break
            chosen.append(i)
            freed += sum(self.sizes.size(m) for m in self.groups[i])
        return chosen, freed

    async def summarize(
        self,
        head: Sequence[Message],
        old: Sequence[int],
        originals: Sequence[Sequence[Message]],
        *,
        task: Sequence[Message],
        summary_tokens: int,
        summarizer: Summarizer | None,
        input_tokens: int,
    ) -> list[Message] | None:
        """Replace the oldest groups by one summary that rolls in the summaries in ``head``
        (the leading system messages); the new head (the other system messages, then the
        summary), or ``None`` when there is nothing to summarise or it would not save tokens.
        The summariser sees ``originals``, the groups as they were before any cut.

        The groups are chosen for the summary message's full cost (its header and framing
        too, not only the ``summary_tokens`` of its body), and a summary always costs less than
        what it replaces: when the old groups are too few for a full summary, its budget
        shrinks to what they free, so the summariser is never called for nothing."""
        previous = [m for m in head if is_summary(m)]
        counter = self.sizes.counter
        frame = self.sizes.measure(SystemMessage(content=f"{SUMMARY_HEADER}\n"))
        chosen, freed = self.oldest(
            old, frame + summary_tokens, sum(self.sizes.size(m) for m in previous)
        )
        budget = min(summary_tokens, freed - frame - 1)
        if (not chosen and not previous) or budget < 1:
            return None
        covered = [m for i in chosen for m in originals[i]]
        text = await _summary_text(
            previous, covered, task=task, budget=budget, summarizer=summarizer,
            input_tokens=input_tokens, counter=counter, result=self.result,
        )  # fmt: skip
        summary = SystemMessage(content=f"{SUMMARY_HEADER}\n{text}")
        for _ in range(4):  # a tokenizer may count the whole a little above its parts
            excess = self.sizes.measure(summary) - (freed - 1)
            if excess <= 0 or not text:
                break
            text = _fit_text(text, counter.count_text(text) - excess, counter)
            summary = SystemMessage(content=f"{SUMMARY_HEADER}\n{text}")
        cost = self.sizes.size(summary)
        if cost >= freed:
            return None
        for i in chosen:
            self.groups[i] = []
        self.total += cost - freed
        self.result.summarized = len(covered)
        return [*(m for m in head if not is_summary(m)), summary]


async def compact(
    messages: Sequence[Message],
    *,
    target: int,
    sizes: MessageSizes,
    base: int = 0,
    pinned: Collection[Message] = (),
    keep_recent: int = 2,
    summary_tokens: int = 600,
    summarizer: Summarizer | None = None,
    summarizer_input_tokens: int = 4000,
    summarize: bool = True,
    offload: Offload | None = None,
) -> Compaction:
    """``messages`` compacted until they cost at most ``target`` tokens (with ``base`` added).

    In order, stopping as soon as the target is met: (1) tool results of older turns are
    offloaded (when ``offload`` can) and cut to a short preview (their start and end; at most
    half of the result, so that a cut saves), oldest first; (2) the oldest turns are replaced
    by one summary message (rolling into an earlier summary; the summariser sees the results as
    they were before (1)), as many as the summary message's full cost requires, and a summary
    always costs less than what it replaces; (3) the results of the most recent turns are cut
    too, to a longer preview, so the model still sees what it just got. Leading system messages
    and ``pinned`` messages are never changed, and a tool call always keeps its result (messages
    are taken in groups: an assistant message with the results of its calls). The result says
    whether the target was reached.

    The summariser's input is bounded (the transcript is summarised in chunks of at most
    ``summarizer_input_tokens``, each with the summary so far) and a summary longer than
    ``summary_tokens`` is cut. Every summary also carries a step log kept by compaction itself
    (each tool call with the first line of its result, under ``STEPS_HEADER``), which is all
    it holds when there is no summariser or it fails (``Compaction.summary_error`` says why).
    """
    before = base + sizes.total(messages)
    result = Compaction(messages=list(messages), before=before, after=before)
    if before <= target:
        return result
    head = list(messages[: _leading_system(messages)])
    groups = _groups(messages[len(head) :])
    originals = [list(g) for g in groups]  # the summariser sees results as they were, not stubs
    pinned_ids = {id(m) for m in pinned}
    old, recent = _old_and_recent(groups, pinned_ids, keep_recent)
    work = _Compactor(
        groups=groups, sizes=sizes, target=target, total=before, result=result, offload=offload
    )
    await work.trim(old, keep_chars=_OLD_PREVIEW_CHARS)  # (1)
    if work.over and summarize:  # (2) summarise the oldest unkept turns
        summarized = await work.summarize(
            head, old, originals, task=[m for m in work.messages() if id(m) in pinned_ids],
            summary_tokens=summary_tokens, summarizer=summarizer,
            input_tokens=summarizer_input_tokens,
        )  # fmt: skip
        head = summarized if summarized is not None else head
    if work.over:  # (3) the recent turns too, oldest first, keeping a preview of each
        await work.trim(recent, keep_chars=_RECENT_PREVIEW_CHARS)
    result.messages = [*head, *work.messages()]
    result.after = work.total
    result.reached = not work.over
    return result
