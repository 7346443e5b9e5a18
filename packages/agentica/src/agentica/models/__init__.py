"""Model providers: the ``Model`` protocol and its adapters.

- ``Model``, ``ModelRequest``, ``ModelResponse``, ``ModelSettings``: the protocol (base.py)
- ``OpenAIChat``, ``OpenAILike``: OpenAI Chat Completions and compatible servers (openai.py)
- ``Claude``: the Anthropic Messages API (anthropic.py)
- ``LocalModel``: the embedded model, llama.cpp in process (local.py, weights.py,
  chat_template.py, toolparse.py)
- ``FallbackModel``: a chain of models tried in order (fallback.py); ``ModelRule``,
  ``Escalate``, ``ByTask``, ``TurnFacts``: the model of each call of a run chosen (rules.py)
- ``model_from_string``, ``resolve_model``, ``PRESETS``: model strings and the default-model
  rule (registry.py)
- ``RetryPolicy`` (retry.py); ``ModelPrice``, ``price_for``: prices and cost (pricing.py)
"""

from __future__ import annotations

from agentica.models.anthropic import Claude
from agentica.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    OutputSchema,
    ResponseDone,
    StreamAssembler,
    ToolChoice,
    collect_stream,
    new_tool_call_id,
)
from agentica.models.fallback import FallbackModel
from agentica.models.local import LocalModel
from agentica.models.openai import OpenAIChat, OpenAILike
from agentica.models.pricing import KNOWN_PRICES, ModelPrice, cost_of, price_for
from agentica.models.registry import PRESETS, model_from_string, resolve_model
from agentica.models.retry import RetryPolicy
from agentica.models.rules import ByTask, Escalate, ModelRule, TurnFacts

__all__ = [
    "KNOWN_PRICES",
    "PRESETS",
    "ByTask",
    "Claude",
    "Escalate",
    "FallbackModel",
    "LocalModel",
    "Model",
    "ModelPrice",
    "ModelRequest",
    "ModelResponse",
    "ModelRule",
    "ModelSettings",
    "ModelStreamEvent",
    "OpenAIChat",
    "OpenAILike",
    "OutputSchema",
    "ResponseDone",
    "RetryPolicy",
    "StreamAssembler",
    "ToolChoice",
    "TurnFacts",
    "collect_stream",
    "cost_of",
    "model_from_string",
    "new_tool_call_id",
    "price_for",
    "resolve_model",
]
