"""Model prices and the cost of token usage.

Prices are US dollars per million tokens, from the providers' public price pages (2025). A model
whose price is not known has an unknown cost (``None``), never zero. Pass ``price=ModelPrice(...)``
to a model adapter to set or correct a price; the embedded local model costs zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentica.messages import Usage

__all__ = ["KNOWN_PRICES", "ModelPrice", "cost_of", "price_for"]


@dataclass(slots=True, frozen=True, kw_only=True)
class ModelPrice:
    """USD per million tokens. Cache prices default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage`` (``input_tokens`` counts cached tokens too)."""
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        fresh = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
        return (
            fresh * self.input
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.output_tokens * self.output
        ) / 1_000_000


def _p(i: float, o: float, r: float | None = None, w: float | None = None) -> ModelPrice:
    return ModelPrice(input=i, output=o, cache_read=r, cache_write=w)


KNOWN_PRICES: Mapping[str, ModelPrice] = MappingProxyType(
    {
        "gpt-5": _p(1.25, 10.0, 0.125),
        "gpt-5-mini": _p(0.25, 2.0, 0.025),
        "gpt-5-nano": _p(0.05, 0.40, 0.005),
        "gpt-4.1": _p(2.0, 8.0, 0.50),
        "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
        "gpt-4o": _p(2.50, 10.0, 1.25),
        "gpt-4o-mini": _p(0.15, 0.60, 0.075),
        "o3": _p(2.0, 8.0, 0.50),
        "o4-mini": _p(1.10, 4.40, 0.275),
        "claude-opus-4": _p(15.0, 75.0, 1.50, 18.75),
        "claude-sonnet-4": _p(3.0, 15.0, 0.30, 3.75),
        "claude-3-7-sonnet": _p(3.0, 15.0, 0.30, 3.75),
        "claude-haiku-4": _p(1.0, 5.0, 0.10, 1.25),
        "claude-3-5-haiku": _p(0.80, 4.0, 0.08, 1.0),
        "deepseek-chat": _p(0.28, 0.42, 0.028),
        "deepseek-reasoner": _p(0.28, 0.42, 0.028),
    }
)


def price_for(model_id: str, table: Mapping[str, ModelPrice] = KNOWN_PRICES) -> ModelPrice | None:
    """The price of ``model_id``: an exact entry, else the longest entry it starts with.

    ``"gpt-4o-2024-08-06"`` is priced as ``"gpt-4o"``, ``"gpt-4o-mini"`` as itself. A provider
    prefix (``"openai/gpt-4o"``) is ignored.
    """
    name = model_id.rsplit("/", 1)[-1].lower()
    exact = table.get(name)
    if exact is not None:
        return exact
    best = ""
    for key in table:
        if name.startswith(key) and len(key) > len(best) and name[len(key)] in "-.:@_":
            best = key
    return table[best] if best else None


def cost_of(usage: Usage, price: ModelPrice | None) -> float | None:
    """The cost of ``usage`` in USD, or ``None`` when the price is unknown."""
    return None if price is None else price.cost(usage)
