"""Context management: token counting, token-budgeted history, tool-call pairing repair.

Compaction with two thresholds, eviction and summarisation arrive with the context-management
issue and build on these pieces.
"""

from agentica.context.history import (
    HistoryPolicy,
    assemble_history,
    repair_tool_pairs,
    truncate_text,
)
from agentica.context.tokens import EstimateCounter, TokenCounter, estimate_tokens

__all__ = [
    "EstimateCounter",
    "HistoryPolicy",
    "TokenCounter",
    "assemble_history",
    "estimate_tokens",
    "repair_tool_pairs",
    "truncate_text",
]
