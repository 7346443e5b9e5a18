"""Naming models by string, provider presets, and the default-model rule.

``model_from_string("deepseek:deepseek-chat")`` builds the right adapter from a preset (base URL,
environment variable of the key, context window); ``resolve_model`` picks the model an agent uses
when none is given (``$AGENTICA_MODEL``, else the embedded local model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agentica.errors import UsageError
from agentica.models.base import Model
from agentica.models.pricing import ModelPrice

__all__ = ["PRESETS", "ProviderPreset", "model_from_string", "resolve_model"]


@dataclass(slots=True, frozen=True, kw_only=True)
class ProviderPreset:
    """How to reach one provider."""

    name: str
    kind: str  # "openai" (Chat Completions), "anthropic" or "local"
    base_url: str = ""
    api_key_env: str = ""
    base_url_env: str = ""
    context_window: int | None = None
    key_required: bool = True
    prices: tuple[tuple[str, ModelPrice], ...] = ()
    docs: str = ""


def _p(i: float, o: float, r: float | None = None) -> ModelPrice:
    return ModelPrice(input=i, output=o, cache_read=r)


PRESETS: dict[str, ProviderPreset] = {
    p.name: p
    for p in (
        ProviderPreset(name="openai", kind="openai", base_url="https://api.openai.com/v1",
                       api_key_env="OPENAI_API_KEY", base_url_env="OPENAI_BASE_URL",
                       context_window=128_000, docs="OpenAI"),
        ProviderPreset(name="anthropic", kind="anthropic", base_url="https://api.anthropic.com",
                       api_key_env="ANTHROPIC_API_KEY", base_url_env="ANTHROPIC_BASE_URL",
                       context_window=200_000, docs="Anthropic Messages API"),
        ProviderPreset(name="deepseek", kind="openai", base_url="https://api.deepseek.com/v1",
                       api_key_env="DEEPSEEK_API_KEY", base_url_env="DEEPSEEK_BASE_URL",
                       context_window=128_000, docs="DeepSeek"),
        ProviderPreset(name="qwen", kind="openai",
                       base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
                       api_key_env="DASHSCOPE_API_KEY", base_url_env="DASHSCOPE_BASE_URL",
                       context_window=131_072, docs="Qwen on Alibaba Cloud DashScope",
                       prices=(("qwen-turbo", _p(0.05, 0.20)), ("qwen-plus", _p(0.40, 1.20)),
                               ("qwen-max", _p(1.60, 6.40)))),
        ProviderPreset(name="moonshot", kind="openai", base_url="https://api.moonshot.cn/v1",
                       api_key_env="MOONSHOT_API_KEY", base_url_env="MOONSHOT_BASE_URL",
                       context_window=128_000, docs="Moonshot (Kimi)"),
        ProviderPreset(name="zhipu", kind="openai", base_url="https://open.bigmodel.cn/api/paas/v4",
                       api_key_env="ZHIPUAI_API_KEY", base_url_env="ZHIPUAI_BASE_URL",
                       context_window=128_000, docs="Zhipu GLM"),
        ProviderPreset(name="doubao", kind="openai",
                       base_url="https://ark.cn-beijing.volces.com/api/v3",
                       api_key_env="ARK_API_KEY", base_url_env="ARK_BASE_URL",
                       context_window=128_000, docs="Doubao on Volcengine Ark"),
        ProviderPreset(name="vllm", kind="openai", base_url="http://127.0.0.1:8000/v1",
                       api_key_env="VLLM_API_KEY", base_url_env="VLLM_BASE_URL",
                       key_required=False, docs="a vLLM server"),
        ProviderPreset(name="ollama", kind="openai", base_url="http://127.0.0.1:11434/v1",
                       api_key_env="OLLAMA_API_KEY", base_url_env="OLLAMA_BASE_URL",
                       key_required=False, docs="an Ollama server"),
        ProviderPreset(name="llamacpp", kind="openai", base_url="http://127.0.0.1:8080/v1",
                       api_key_env="LLAMACPP_API_KEY", base_url_env="LLAMACPP_BASE_URL",
                       key_required=False, docs="a llama.cpp server"),
        ProviderPreset(name="local", kind="local", key_required=False,
                       docs="the embedded model (llama.cpp in this process)"),
    )
}  # fmt: skip


def _price(preset: ProviderPreset, model_id: str) -> ModelPrice | None:
    best = ""
    for prefix, _ in preset.prices:
        if model_id.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return dict(preset.prices)[best] if best else None


def model_from_string(spec: str, **options: Any) -> Model:
    """The model named by ``"provider:model-id"`` (or ``"local"``); ``options`` go to its class.

    Strings: ``"openai:gpt-4o"``, ``"anthropic:claude-sonnet-4-5"``, ``"deepseek:deepseek-chat"``,
    ``"qwen:qwen-plus"``, ``"moonshot:kimi-k2-0905-preview"``, ``"zhipu:glm-4.6"``,
    ``"doubao:doubao-seed-1-6"``, ``"vllm:MODEL"``, ``"ollama:qwen2.5"``, ``"llamacpp:MODEL"``,
    ``"local"`` or ``"local:qwen2.5-coder-0.5b-instruct"``; a bare id is an OpenAI model. A
    preset's base URL can be changed with its ``*_BASE_URL`` variable.
    """
    provider, sep, model_id = spec.strip().partition(":")
    if not sep and provider != "local":
        provider, model_id = "openai", provider  # a bare id means an OpenAI model
    preset = PRESETS.get(provider.lower())
    if preset is None:
        raise UsageError(
            f"unknown provider {provider!r} in model {spec!r}: use one of "
            f"{', '.join(PRESETS)} (e.g. 'deepseek:deepseek-chat'), or OpenAILike(base_url=...)"
        )
    if preset.kind == "local":
        from agentica.models.local import DEFAULT_LOCAL_MODEL, LocalModel, shared_local_model

        name = model_id or DEFAULT_LOCAL_MODEL
        return LocalModel(name, **options) if options else shared_local_model(name)
    if not model_id:
        raise UsageError(f"model {spec!r} names no model: write '{provider}:MODEL_ID'")
    base_url = os.environ.get(preset.base_url_env) or preset.base_url
    api_key = options.pop("api_key", None) or os.environ.get(preset.api_key_env)
    if preset.key_required and not api_key:
        raise UsageError(
            f"model {spec!r} needs an API key: set ${preset.api_key_env} or pass api_key=..."
        )
    if preset.kind == "anthropic":
        from agentica.models.anthropic import Claude

        return Claude(model_id, api_key=api_key, base_url=base_url, **options)
    from agentica.models.openai import OpenAIChat

    options.setdefault("context_window", preset.context_window)
    options.setdefault("tool_mode", "native" if preset.name == "openai" else "auto")
    if (price := _price(preset, model_id)) is not None:
        options.setdefault("price", price)
    return OpenAIChat(
        model_id,
        api_key=api_key or "",
        base_url=base_url,
        provider=preset.name,
        max_tokens_field="max_completion_tokens" if preset.name == "openai" else "max_tokens",
        **options,
    )


def resolve_model(model: Model | str | None) -> Model:
    """The model an agent uses: explicit > ``$AGENTICA_MODEL`` > the embedded local model.

    ``$AGENTICA_MODEL`` is a model string; with ``$AGENTICA_BASE_URL`` it names a model on that
    OpenAI-compatible server.
    """
    if model is not None and not isinstance(model, str):
        return model
    spec = model or os.environ.get("AGENTICA_MODEL", "").strip()
    base_url = os.environ.get("AGENTICA_BASE_URL", "").strip()
    if base_url and not model:
        from agentica.models.openai import OpenAILike

        return OpenAILike(
            id=spec or "default",
            base_url=base_url,
            api_key=os.environ.get("AGENTICA_API_KEY") or None,
        )
    if spec:
        return model_from_string(spec)
    from agentica.models.local import shared_local_model

    return shared_local_model()
