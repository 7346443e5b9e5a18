"""``KnowledgeTools``: the ``search_knowledge_base`` tool over a ``Knowledge`` base.

Each result names its source and place (``[1] docs/guide.md, lines 419-432 (Guide > Deep
agents)``) above its text. With ``VariableSpace`` on the agent, the whole tool output is also
archived as evidence and ends with its ``[__ref: evidence.tool_call.<id>]``, so an answer can
cite what it rests on.
"""

from __future__ import annotations

from typing import Any

from agentica.errors import ToolError, UsageError
from agentica.knowledge.base import Knowledge, SearchMode
from agentica.tools.context import RunContext
from agentica.tools.function import tool
from agentica.tools.toolkit import Tool

__all__ = ["KnowledgeTools"]


class KnowledgeTools(Tool):
    """Gives an agent ``search_knowledge_base``.

    Args:
        knowledge: the knowledge base.
        max_results: the most results one call may ask for.
        max_chars: the most characters of one result's text shown.
        mode: how to search (``"hybrid"``, ``"vector"`` or ``"bm25"``).
        name: the group's name.
    """

    def __init__(
        self,
        knowledge: Knowledge,
        *,
        max_results: int = 8,
        max_chars: int = 1500,
        mode: SearchMode = "hybrid",
        name: str = "knowledge",
    ) -> None:
        if max_results < 1:
            raise UsageError(f"max_results must be at least 1, not {max_results}")
        self.knowledge = knowledge
        self.max_results = max_results
        self.max_chars = max_chars
        self.mode: SearchMode = mode
        super().__init__(name)

    @tool
    async def search_knowledge_base(self, ctx: RunContext[Any], query: str, k: int = 4) -> str:
        """Search the knowledge base; results name their source and lines.

        Args:
            query: what to look for, in words (a question or key words).
            k: how many results.
        """
        if not query.strip():
            raise ToolError("query is empty: say what to look for, e.g. 'how to install'")
        k = max(1, min(int(k), self.max_results))
        hits = await self.knowledge.search(query, k, mode=self.mode)
        if not hits:
            return f"Nothing in the knowledge base matches {query!r}."
        parts = []
        for number, hit in enumerate(hits, start=1):
            heading = f" ({hit.chunk.heading})" if hit.chunk.heading else ""
            text = hit.chunk.text
            if len(text) > self.max_chars:
                text = text[: self.max_chars] + " [...]"
            parts.append(f"[{number}] {hit.citation}{heading}\n{text}")
        return "\n\n".join(parts)
