"""Context management: token counting (tokens.py, tokenizers.py), token-budgeted history and
tool-call pairing repair (history.py), and the dual-threshold compaction of a growing run
(compaction.py), which the run loop applies through ``agentica.run.window``.
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
