"""Context management: token counting, token-budgeted history, compaction, pairing repair.

- token counters: ``counter_for(model_id)`` picks an exact offline counter (tiktoken encodings,
  a GGUF file's tokenizer) or the estimate; they load lazily (tokens.py, tokenizers.py);
- ``assemble_history`` replays earlier runs within a budget; ``repair_tool_pairs`` makes any
  message list valid for providers (history.py);
- ``ContextPolicy`` and ``compact``: the dual-threshold compaction of a growing run
  (compaction.py). The run loop applies them through ``agentica.run.window``.
"""

from agentica.context.compaction import (
    STEPS_HEADER,
    SUMMARY_HEADER,
    Compaction,
    ContextBudget,
    ContextPolicy,
    MessageSizes,
    Summarizer,
    compact,
    is_summary,
    preview,
    transcript,
)
from agentica.context.history import (
    HistoryPolicy,
    assemble_history,
    repair_tool_pairs,
    tool_pairs_ok,
    truncate_text,
)
from agentica.context.tokenizers import (
    GGUFCounter,
    TiktokenCounter,
    counter_for,
    encoding_for_model,
    read_gguf_metadata,
)
from agentica.context.tokens import EstimateCounter, TokenCounter, estimate_tokens

__all__ = [
    "STEPS_HEADER",
    "SUMMARY_HEADER",
    "Compaction",
    "ContextBudget",
    "ContextPolicy",
    "EstimateCounter",
    "GGUFCounter",
    "HistoryPolicy",
    "MessageSizes",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "assemble_history",
    "compact",
    "counter_for",
    "encoding_for_model",
    "estimate_tokens",
    "is_summary",
    "preview",
    "read_gguf_metadata",
    "repair_tool_pairs",
    "tool_pairs_ok",
    "transcript",
    "truncate_text",
]
