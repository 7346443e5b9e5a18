"""Context management: token counting, token-budgeted history, tool-call pairing repair.

Compaction with two thresholds, eviction and summarisation arrive with the context-management
issue and build on these pieces. Token counters: ``counter_for(model_id)`` picks an exact offline
counter (tiktoken encodings, a GGUF file's tokenizer) or the estimate; they load lazily.
"""

from agentica.context.history import (
    HistoryPolicy,
    assemble_history,
    repair_tool_pairs,
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
    "EstimateCounter",
    "GGUFCounter",
    "HistoryPolicy",
    "TiktokenCounter",
    "TokenCounter",
    "assemble_history",
    "counter_for",
    "encoding_for_model",
    "estimate_tokens",
    "read_gguf_metadata",
    "repair_tool_pairs",
    "truncate_text",
]
