"""Token counting: how many tokens a text or a conversation costs a model.

``TokenCounter`` is the protocol every counter follows; ``estimate_tokens`` and
``EstimateCounter`` are the fallback (UTF-8 bytes / 4) for models whose tokenizer is not available
offline. The exact counters live in ``agentica.context.tokenizers``, where ``counter_for(model_id)``
picks one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = ["EstimateCounter", "TokenCounter", "estimate_tokens"]

_PER_MESSAGE = 4  # role and separators
_PER_IMAGE = 765  # a high-detail 512x512 tile in OpenAI's accounting; a fair middle value


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: UTF-8 bytes / 4, rounded up (``EstimateCounter`` has the
    measured error; a lone surrogate, which is not text, counts as its three bytes)."""
    n = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return (n + 3) // 4


class TokenCounter(Protocol):
    """Counts tokens of text and messages for one model family.

    ``count_messages`` is the cost of a request made of these messages (tool definitions aside):
    each message with its framing, plus the request's fixed part (reply priming), so
    ``count_messages(())`` is that fixed part. Exact counters: ``agentica.context.tokenizers``.
    """

    def count_text(self, text: str) -> int: ...

    def count_messages(self, messages: Iterable[Message]) -> int: ...


class EstimateCounter:
    """The fallback counter: ``estimate_tokens`` on every text part of every message.

    ``exact`` is False (the exact counters have ``exact = True``): ``counter_for`` gives this
    counter to the model families whose tokenizer is not available offline (Anthropic's Claude,
    Google's Gemini, Mistral, Llama, Qwen behind an API, ...).

    ``benchmarks/tokenizer_error.py`` measures the estimate on a fixed corpus of English and
    Chinese prose, Python code and JSON tool results (24 documents): against Qwen2.5's tokenizer
    (exact for Qwen's API models) its error is 22% on average and 52% at most; it over-counts
    English by about 20% and under-counts JSON by 26-35% (numbers and punctuation). Claude's and
    Gemini's tokenizers are not public and no copy is available offline, so their error cannot be
    measured: against o200k, cl100k, Qwen2.5 and DeepSeek as proxies it is 18-23% on average and
    49-52% at most, Chinese being the most tokenizer-dependent (-33% to +28%). For these families
    it is a budget-grade number, not a bill: keep a margin of about 50% when a budget must not be
    exceeded.
    """

    __slots__ = ()

    exact = False

    def count_text(self, text: str) -> int:
        return estimate_tokens(text)

    def count_message(self, message: Message) -> int:
        count = _PER_MESSAGE
        if isinstance(message, (SystemMessage, ToolMessage)):
            count += estimate_tokens(message.content)
        elif isinstance(message, UserMessage):
            if isinstance(message.content, str):
                count += estimate_tokens(message.content)
            else:
                for part in message.content:
                    count += (
                        _PER_IMAGE if isinstance(part, ImagePart) else estimate_tokens(part.text)
                    )
        elif isinstance(message, AssistantMessage):
            if message.content:
                count += estimate_tokens(message.content)
            for call in message.tool_calls:
                count += 8 + estimate_tokens(call.name) + estimate_tokens(call.arguments)
        return count

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)
