"""Text tool calls: every shape small local models use, negatives, malformed calls, streaming.

Property tests: parsing never raises; any valid call rendered in any supported shape is recovered
exactly; text naming no tool yields no call; and the stream splitter, fed the same text cut
anywhere, ends with the same calls as parsing the whole text and never shows call text early.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentica.messages import AssistantMessage
from agentica.models.chat_template import render_chatml
from agentica.models.toolparse import (
    MalformedCall,
    ParsedReply,
    ToolCallStreamSplitter,
    as_tool_calls,
    parse_tool_calls,
)

TOOLS = ("read_file", "write_file", "run_python")
PROPERTY = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def calls_of(reply: ParsedReply) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, json.loads(call.arguments)) for call in reply.calls]


def parse(text: str) -> ParsedReply:
    return parse_tool_calls(text, TOOLS)


def stream(text: str, cuts: list[int]) -> tuple[str, ParsedReply]:
    splitter = ToolCallStreamSplitter(TOOLS)
    bounds = [0, *sorted(cuts), len(text)]
    shown = "".join(splitter.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    return shown, splitter.finish()


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


# ---- the shapes models write ---------------------------------------------------------------------

READ_A = ("read_file", {"path": "a.py"})
CODE = 'def f():\n    return "x"\n'

SHAPES = {
    "bare": ('{"name": "read_file", "arguments": {"path": "a.py"}}', [READ_A]),
    "fenced json, triple-quoted code (measured)": (
        '```json\n{"name": "write_file", "arguments": {"path": "f.py", "content": """'
        + CODE
        + '"""}}\n```',
        [("write_file", {"path": "f.py", "content": CODE})],
    ),
    "fenced, single triple quotes": (
        "```json\n{\"name\": \"run_python\", \"arguments\": {\"code\": '''print('hi')\n'''}}\n```",
        [("run_python", {"code": "print('hi')\n"})],
    ),
    "raw newlines in a string": (
        '{"name": "run_python", "arguments": {"code": "x = 1\nprint(x)"}}',
        [("run_python", {"code": "x = 1\nprint(x)"})],
    ),
    "fence without language": (
        '```\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
        [READ_A],
    ),
    "tool_call fence": (
        '```tool_call\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
        [READ_A],
    ),
    "python fence, Python dict": (
        "```python\n{'name': 'run_python', "
        "'arguments': {'code': 'print(1)', 'check': True, 'x': None}}\n```",
        [("run_python", {"code": "print(1)", "check": True, "x": None})],
    ),
    "two objects": (
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n\n'
        '{"name": "run_python", "arguments": {"code": "1"}}',
        [READ_A, ("run_python", {"code": "1"})],
    ),
    "two objects separated by a comma": (
        '{"name": "read_file", "arguments": {"path": "a.py"}},\n'
        '{"name": "read_file", "arguments": {}}',
        [READ_A, ("read_file", {})],
    ),
    "list of calls": (
        '[{"name": "read_file", "arguments": {"path": "a.py"}}, {"name": "write_file", '
        '"arguments": {"path": "b", "content": ""}}]',
        [READ_A, ("write_file", {"path": "b", "content": ""})],
    ),
    "tool_calls wrapper": (
        '{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}',
        [READ_A],
    ),
    "parameters key": ('{"name": "read_file", "parameters": {"path": "a.py"}}', [READ_A]),
    "arguments as a JSON string": (
        '{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}',
        [READ_A],
    ),
    "function wrapper": (
        '{"function": {"name": "read_file", "arguments": {"path": "a.py"}}}',
        [READ_A],
    ),
    "type/function wrapper": (
        '{"type": "function", "id": "x", "function": '
        '{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}}',
        [READ_A],
    ),
    "trailing commas and comments": (
        '{\n  "name": "read_file", // read it\n  "arguments": {"path": "a.py",},  # then\n}',
        [READ_A],
    ),
    "tags": (
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>',
        [READ_A],
    ),
    "unclosed tag": ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}', [READ_A]),
    "tag around a fence": (
        '<tool_call>\n```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        "```\n</tool_call>",
        [READ_A],
    ),
    "case-insensitive name": ('{"name": "Read_File", "arguments": {"path": "a.py"}}', [READ_A]),
    "functions. prefix": (
        '{"name": "functions.read_file", "arguments": {"path": "a.py"}}',
        [READ_A],
    ),
    "null arguments": ('{"name": "read_file", "arguments": null}', [("read_file", {})]),
    "missing arguments": ('{"name": "read_file"}', [("read_file", {})]),
    "empty string arguments": ('{"name": "read_file", "arguments": ""}', [("read_file", {})]),
    "invalid escape in a string": (
        '{"name": "run_python", "arguments": {"code": "re.match(\'\\d+\', s)"}}',
        [("run_python", {"code": "re.match('\\d+', s)"})],
    ),
    "extra note beside the arguments": (
        '{"name": "read_file", "arguments": {"path": "a.py"}, "thought": "look first"}',
        [READ_A],
    ),
    "unquoted keys": ('{name: "read_file", arguments: {path: "a.py"}}', [READ_A]),
    "unquoted keys, fenced, JS style": (
        "```json\n{\n  name: 'read_file',\n  arguments: {path: 'a.py',},\n}\n```",
        [READ_A],
    ),
    "unquoted keys in the arguments only": (
        '{"name": "read_file", "arguments": {path: "a.py"}}',
        [READ_A],
    ),
    "unquoted keys, type/function wrapper in tags": (
        '<tool_call>{type: "function", function: {name: "read_file", arguments: {path: "a.py"}}}'
        "</tool_call>",
        [READ_A],
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_is_recovered(shape: str) -> None:
    text, expected = SHAPES[shape]
    reply = parse(text)
    assert calls_of(reply) == expected
    assert reply.malformed == []
    assert reply.text == ""


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_with_prose_around_keeps_the_prose(shape: str) -> None:
    text, expected = SHAPES[shape]
    reply = parse(f"I'll do that now.\n\n{text}\n\nThen I will check the result.")
    assert calls_of(reply) == expected
    assert reply.text == "I'll do that now.\n\nThen I will check the result."


def test_prose_and_fenced_call_as_measured() -> None:
    text = (
        "To create the file, I will call the write_file tool:\n"
        '```json\n{\n  "name": "write_file",\n  "arguments": {\n    "path": "hello.py",\n'
        '    "content": """print("Hello, world!")\n"""\n  }\n}\n```\n'
        "This writes hello.py."
    )
    reply = parse(text)
    assert calls_of(reply) == [
        ("write_file", {"path": "hello.py", "content": 'print("Hello, world!")\n'})
    ]
    assert (
        reply.text == "To create the file, I will call the write_file tool:\nThis writes hello.py."
    )


def test_calls_get_fresh_ids_and_compact_arguments() -> None:
    reply = parse('{"name": "read_file", "arguments": {"path": "é"}}\n{"name": "read_file"}')
    first, second = reply.calls
    assert first.id.startswith("call_") and first.id != second.id
    assert first.arguments == '{"path":"é"}'
    assert second.arguments == "{}"


def test_triple_quoted_text_is_verbatim() -> None:
    text = '{"name": "run_python", "arguments": {"code": """print("a\\nb")\n"""}}'
    assert calls_of(parse(text)) == [("run_python", {"code": 'print("a\\nb")\n'})]


def test_a_call_nested_in_its_own_arguments_is_unwrapped() -> None:
    """As measured on the 1.5B model: the call written again, as a JSON string, as its arguments."""
    inner = json.dumps({"name": "run_python", "arguments": {"code": "print(1)"}})
    text = json.dumps({"name": "run_python", "arguments": inner})
    assert calls_of(parse(text)) == [("run_python", {"code": "print(1)"})]
    nested = '{"name": "read_file", "arguments": {"name": "read_file", "arguments": {"path": "a"}}}'
    assert calls_of(parse(nested)) == [("read_file", {"path": "a"})]
    deep: object = {"code": "print(1)"}
    for level in range(6):  # the model copies a broken call from its history, one level deeper
        wrapped = {"name": "run_python", "arguments": deep}
        deep = json.dumps(wrapped) if level % 2 else wrapped
    text = json.dumps({"name": "run_python", "arguments": deep})
    assert calls_of(parse(text)) == [("run_python", {"code": "print(1)"})]


def test_an_argument_called_name_is_not_unwrapped() -> None:
    text = '{"name": "write_file", "arguments": {"name": "notes", "arguments": "x"}}'
    assert calls_of(parse(text)) == [("write_file", {"name": "notes", "arguments": "x"})]


def test_calls_keep_their_order_across_shapes() -> None:
    text = (
        '<tool_call>{"name": "write_file", "arguments": {"path": "x", "content": "1"}}'
        "</tool_call>\n"
        '```json\n{"name": "run_python", "arguments": {"code": "2"}}\n```\n'
        '{"name": "read_file", "arguments": {"path": "x"}}'
    )
    assert [name for name, _ in calls_of(parse(text))] == ["write_file", "run_python", "read_file"]


# ---- what is not a call --------------------------------------------------------------------------

NOT_CALLS = [
    '{"name": "Alice", "age": 3}',
    'Here is the JSON you asked for:\n```json\n{"name": "Al", "arguments": "no", "age": 3}\n```',
    '{"result": [1, 2, 3], "ok": true}',
    '[{"name": "Alice"}, {"name": "Bob"}]',
    '{"tool": "read_file", "reason": "to see the code"}',
    '{"file": "read_file", "arguments": {"path": "a"}}',
    '{"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}',
    '```python\nconfig = {"name": "read_file", "arguments": {"path": "a"}}\nprint(config)\n```',
    '```python\nd = {"a": 1}\nprint(d["a"])\n```',
    "Use read_file to read and write_file to write; see [the docs](https://x.y/{id}).",
    'print(f"{name}: {value}") and {"x"} and [ {} ] and { }',
    "```json\n[1, 2, 3]\n```",
    "```python\nx = {a: 1}\n```",
    "```python\n{a: 1, b: 2}\n```",
    '```js\nconst user = {name: "Bob", age: 3};\n```',
    '```js\nconst call = {name: "read_file", arguments: {path: "a"}};\nsend(call);\n```',
    '{name: "Alice", age: 3}',
    '```js\n{name: "Alice", tags: [{name: "x"}]}\n```',
    "Objects are written {name: value}, and {a: 1} is one.",
    '{name: "read_file", description: "Read a file", parameters: {type: "object"}}',
]


@pytest.mark.parametrize("text", NOT_CALLS)
def test_ordinary_text_and_json_stay_text(text: str) -> None:
    reply = parse(text)
    assert reply.calls == [] and reply.malformed == []
    assert reply.text == text.strip()


# ---- malformed calls -----------------------------------------------------------------------------


def only_malformed(text: str) -> MalformedCall:
    reply = parse(text)
    assert reply.calls == []
    assert len(reply.malformed) == 1
    return reply.malformed[0]


def test_unknown_tool_is_malformed_and_lists_the_tools() -> None:
    bad = only_malformed('Let me run it.\n{"name": "shell", "arguments": {"cmd": "ls"}}')
    assert bad.name == "shell"
    assert "shell" in bad.reason and all(tool in bad.reason for tool in TOOLS)
    assert parse('Let me run it.\n{"name": "shell", "arguments": {}}').text == "Let me run it."


def test_invalid_json_to_a_known_tool_is_malformed() -> None:
    raw = '{"name": "write_file", "arguments": {"path": "a", "content": "print("hi")"}}'
    bad = only_malformed(f"Writing:\n{raw}\nDone.")
    assert bad.name == "write_file" and bad.raw == raw
    assert "not valid JSON" in bad.reason and '"arguments"' in bad.reason
    assert parse(f"Writing:\n{raw}\nDone.").text == "Writing:\nDone."


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [
        (
            '{"name": "write_file", "arguments": {"path": "a", "content": "print("hi")"}}',
            '{"path": "a", "content": "print("hi")"}',
        ),
        (
            '{"name": "write_file", "arguments": {"path": "a", "content": "de',
            '{"path": "a", "content": "de',
        ),
        ('{"name": "read_file", "arguments": [1, 2]}', "[1, 2]"),
        ('{"name": "shell", "arguments": {"cmd": "ls"}}', '{"cmd": "ls"}'),
    ],
    ids=["invalid-json", "cut-off", "not-an-object", "unknown-tool"],
)
def test_a_malformed_call_keeps_its_arguments_as_written(raw: str, arguments: str) -> None:
    (call,) = as_tool_calls(parse(f"```json\n{raw}\n```"))
    assert call.arguments == arguments  # the engine reports what is wrong with these
    shown = render_chatml([AssistantMessage(tool_calls=[call])])
    # the history shows the call as written, never the whole call again inside "arguments"
    # (a small model imitates that and nests its call deeper on every retry)
    assert f'"arguments": {arguments}' in shown and shown.count('"name"') == 1


def test_unquoted_keys_are_quoted_but_strings_are_left_as_written() -> None:
    code = "d = {a: 1, 'b': 2}\nprint(d, {x: 'y'})  # x: y"
    text = f"{{name: 'run_python', arguments: {{code: {json.dumps(code)}}}}}"
    reply = parse(text)
    assert calls_of(reply) == [("run_python", {"code": code})] and reply.malformed == []
    assert reply.text == ""


@pytest.mark.parametrize(
    "wrapping", ["{}", "Adding.\n{}", "```json\n{}\n```", "```\n{}", "<tool_call>{}</tool_call>"]
)
def test_a_call_with_unquoted_keys_that_is_still_broken_goes_back_to_the_model(
    wrapping: str,
) -> None:
    """Keys without quotes and a value that is not JSON either (a bare path): the attempt is not
    the final answer but a malformed call to ``read_file``, with how to write it."""
    text = wrapping.replace("{}", "{name: 'read_file', arguments: {path: a.py}}")
    bad = only_malformed(text)
    assert bad.name == "read_file" and "double quotes" in bad.reason
    assert [call.name for call in as_tool_calls(parse(text))] == ["read_file"]


def test_a_call_with_unquoted_keys_missing_its_last_brace_is_repaired() -> None:
    call = '{name: "read_file", arguments: {path: "a.py"}'
    for text in (call, f"```json\n{call}\n```", f"<tool_call>\n{call}\n</tool_call>"):
        reply = parse(text)
        assert calls_of(reply) == [READ_A] and reply.malformed == [] and reply.text == ""


def test_a_function_form_call_with_unquoted_keys_is_a_call() -> None:
    text = 'Reading: read_file({path: "a.py"}) and console.log({a: 1}) stays.'
    reply = parse(text)
    assert calls_of(reply) == [READ_A] and reply.malformed == []
    assert reply.text == "Reading: and console.log({a: 1}) stays."
    for cuts in ([12, 22, 23, 26], list(range(len(text)))):
        shown, streamed = stream(text, cuts)
        assert calls_of(streamed) == [READ_A] and shown == "Reading: "


def test_a_call_with_unquoted_keys_to_an_unknown_tool_is_malformed() -> None:
    bad = only_malformed('```json\n{name: "shell", arguments: {cmd: "ls"}}\n```')
    assert bad.name == "shell" and "no tool named 'shell'" in bad.reason


def test_the_stream_holds_a_call_with_unquoted_keys() -> None:
    text = 'Let me look.\n{ name: "read_file", arguments: {path: "a.py"}}\nThen more.'
    for cuts in (list(range(len(text))), [14, 15, 16, 17, 19], [13]):
        shown, reply = stream(text, cuts)
        assert shown == "Let me look.\n"
        assert calls_of(reply) == [READ_A] and reply.text == "\nThen more."
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("x = {nam") == "x = "  # may be {name: ...}
    assert splitter.feed("e2: 1} and {a: 2}") == "{name2: 1} and {a: 2}"


def test_truncated_call_is_malformed() -> None:
    bad = only_malformed(
        '```json\n{"name": "write_file", "arguments": {"path": "a", "content": "de'
    )
    assert bad.name == "write_file"
    assert "cut off" in bad.reason


@pytest.mark.parametrize(
    ("arguments", "word"), [("[1, 2]", "array"), ("3", "number"), ('"path=a"', "string")]
)
def test_arguments_that_are_not_an_object_are_malformed(arguments: str, word: str) -> None:
    bad = only_malformed(f'{{"name": "read_file", "arguments": {arguments}}}')
    assert bad.name == "read_file" and word in bad.reason


def test_non_json_inside_tags_is_malformed() -> None:
    reply = parse("<tool_call>\nread_file(path='a.py')\n</tool_call>\nok")
    assert reply.calls == [] and reply.text == "ok"
    assert reply.malformed[0].raw == "read_file(path='a.py')"


def test_list_with_a_non_call_item() -> None:
    reply = parse('[{"name": "read_file", "arguments": {"path": "a.py"}}, 42]')
    assert calls_of(reply) == [READ_A]
    assert [bad.raw for bad in reply.malformed] == ["42"]


def test_stray_brace_before_a_call_does_not_hide_it() -> None:
    reply = parse('I think {"x is odd.\n{"name": "read_file", "arguments": {"path": "a.py"}}')
    assert calls_of(reply) == [READ_A]


READ_CALL = '{"name": "read_file", "arguments": {"path": "a.py"}}'
STRAY_BRACKETS = {
    "one }": READ_CALL + "}",
    "three }": READ_CALL + "}}}",
    "] and }": READ_CALL + "}]",
    "} on its own line": READ_CALL + "\n}",
    "doubled braces": "{" + READ_CALL + "}",
    "list closed with }": "[" + READ_CALL + "}]",
    "function form": 'read_file({"path": "a.py"}})',
}
WRAPPINGS = {
    "bare": "{}",
    "prose, bare": "Reading it.\n{}",
    "fenced json": "```json\n{}\n```",
    "fenced": "Reading it.\n```\n{}\n```\nDone.",
    "unclosed fence": "```json\n{}",
    "tag": "<tool_call>\n{}\n</tool_call>",
}


@pytest.mark.parametrize("wrapping", WRAPPINGS)
@pytest.mark.parametrize("body", STRAY_BRACKETS)
def test_a_call_with_stray_brackets_is_parsed_fenced_or_not(body: str, wrapping: str) -> None:
    """A stray closing brace made a fenced call the final answer while the same call unfenced
    was parsed; both are the call (and the stray brackets are not left in the prose)."""
    head, tail = WRAPPINGS[wrapping].split("{}")
    text = head + STRAY_BRACKETS[body] + tail
    reply = parse(text)
    assert calls_of(reply) == [READ_A] and reply.malformed == []
    assert not re.search(r"[}\]]", reply.text)  # (a stray "{" before a bare call may stay)
    assert calls_of(stream(text, [len(text) // 3, len(text) // 2])[1]) == [READ_A]


def test_a_fenced_call_to_an_unknown_tool_with_a_stray_brace_goes_back_to_the_model() -> None:
    reply = parse('```json\n{"name": "shell", "arguments": {"cmd": "ls"}}}\n```')
    assert reply.calls == [] and [bad.name for bad in reply.malformed] == ["shell"]
    assert [call.name for call in as_tool_calls(reply)] == ["shell"]  # refused by the engine


# ---- long inputs ---------------------------------------------------------------------------------

CALL = '{"name": "read_file", "arguments": {"path": "a.py"}}'
LONG_INPUTS = {
    "stray openings": '{"a' * 70_000,
    "list openings": "[{" * 100_000,
    "triple quotes": '{"' + '"""' * 70_000,
    "backticks": "`" * 200_000,
    "tags": "<tool_call>" * 20_000,
    "nesting": '{"a":' * 40_000 + "1" + "}" * 40_000,
    "brackets": "[" * 200_000,
    "comments and commas": '{"name": "read_file", "arguments": {' + ", //x" * 40_000,
    "huge valid call": '{"name": "write_file", "arguments": {"content": "'
    + "x\\n" * 70_000
    + '"}}',
    "prose then a call": "Some prose, with 'quotes' and \"more\". " * 5_000 + CALL,
}


@pytest.mark.parametrize("name", list(LONG_INPUTS))
def test_long_inputs_finish_quickly(name: str) -> None:
    text = LONG_INPUTS[name]
    started = time.perf_counter()
    reply = parse(text)
    splitter = ToolCallStreamSplitter(TOOLS)
    for i in range(0, len(text), 1000):
        splitter.feed(text[i : i + 1000])
    splitter.finish()
    assert time.perf_counter() - started < 3.0
    if name in ("huge valid call", "prose then a call"):
        assert len(reply.calls) == 1


# ---- streaming -----------------------------------------------------------------------------------


def test_stream_shows_prose_and_holds_the_call() -> None:
    text = 'Let me look.\n{"name": "read_file", "arguments": {"path": "a.py"}}\nThen more.'
    shown, reply = stream(text, list(range(len(text))))
    assert shown == "Let me look.\n"
    assert calls_of(reply) == [READ_A] and reply.text == "\nThen more."


def test_stream_shows_a_code_block_without_calls_once_closed() -> None:
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("Run:\n``") == "Run:\n"
    assert splitter.feed("`bash\nls -la\n") == ""
    assert splitter.feed("```\nDone <") == "```bash\nls -la\n```\nDone "
    assert splitter.feed("b>") == "<b>"
    reply = splitter.finish()
    assert reply == ParsedReply(text="", calls=[], malformed=[])


def test_stream_holds_a_tag_split_across_deltas() -> None:
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("ok <tool_") == "ok "
    assert splitter.feed('call>{"name": "read_file", "arguments": {"path": "a.py"}}') == ""
    reply = splitter.finish()
    assert calls_of(reply) == [READ_A] and reply.text == ""
    assert splitter.feed("next reply") == "next reply"  # finish() readied it for another reply


def test_stream_releases_brace_that_starts_no_call() -> None:
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("a { ") == "a "
    assert splitter.feed("b }") == "{ b }"


# ---- properties ----------------------------------------------------------------------------------

PROSE_CHARS = st.characters(codec="utf-8", exclude_characters="{}[]<`")
prose = st.text(PROSE_CHARS, max_size=40).filter(lambda s: not s or any(c.isalnum() for c in s))
lines = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=12),
    min_size=2,
    max_size=4,
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    lines.map("\n".join),
)
arguments = st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=4)


def dump(value: Any, triple: str) -> str:
    """JSON, but multi-line strings as triple-quoted verbatim text when ``triple`` is set."""
    if isinstance(value, dict):
        items = (f"{json.dumps(key)}: {dump(item, triple)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    if triple and isinstance(value, str) and "\n" in value and triple not in value:
        return triple + value + triple
    return json.dumps(value)


IDENTIFIER = re.compile(r"[A-Za-z_]\w*", re.ASCII)


def dump_bare_keys(value: Any) -> str:
    """JSON, but keys that are identifiers without quotes, as in JavaScript: {name: "f"}."""
    if isinstance(value, dict):
        items = (
            f"{key if IDENTIFIER.fullmatch(key) else json.dumps(key)}: {dump_bare_keys(item)}"
            for key, item in value.items()
        )
        return "{" + ", ".join(items) + "}"
    return json.dumps(value)


def raw_newlines(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(), text)


@st.composite
def call_snippet(draw: st.DrawFn, json_only: bool) -> tuple[str, tuple[str, dict[str, Any]]]:
    name = draw(st.sampled_from(TOOLS))
    args = draw(arguments)
    written = draw(st.sampled_from([name, name.upper(), "functions." + name]))
    payload: Any = json.dumps(args) if draw(st.booleans()) else args
    obj: dict[str, Any] = {
        "name": written,
        draw(st.sampled_from(["arguments", "parameters"])): payload,
    }
    obj = draw(st.sampled_from([obj, {"function": obj}, {"type": "function", "function": obj}]))
    # name({...}), as small models copy a call shown in that form (not inside a list of calls)
    as_function = not json_only and bool(args) and draw(st.booleans())
    if as_function:
        obj = args
    encodings = ["json", "indented", "raw newlines", '"""', "'''", "comments", "bare keys"]
    encoding = draw(st.sampled_from(encodings if json_only else [*encodings, "python"]))
    if encoding == "python":
        text = repr(obj)
    elif encoding == "bare keys":
        text = dump_bare_keys(obj)
    elif encoding in ('"""', "'''"):
        text = dump(obj, encoding)
    elif encoding == "raw newlines":
        text = raw_newlines(json.dumps(obj, ensure_ascii=False))
    else:
        text = json.dumps(
            obj, indent=None if encoding == "json" else 2, ensure_ascii=draw(st.booleans())
        )
    if encoding == "comments":
        rows = text.split("\n")
        rows[1] += "  // the call"
        rows[-2] += ",  # done"
        text = "\n".join(rows)
    if as_function:
        text = f"{written}({text})"
    return text, (name, args)


def wrap_in(text: str, wrap: str) -> str:
    if wrap == "bare":
        return text
    if wrap == "tag":
        return f"<tool_call>\n{text}\n</tool_call>"
    if wrap == "open tag":
        return f"<tool_call>\n{text}"
    return f"{wrap}\n{text}\n```"


@st.composite
def reply_with_calls(draw: st.DrawFn) -> tuple[str, int, list[tuple[str, dict[str, Any]]], str]:
    """(reply, where the first call starts, the calls, the prose)."""
    grouping = draw(st.sampled_from(["each", "one", "list"]))
    snippets = draw(st.lists(call_snippet(json_only=grouping == "list"), min_size=1, max_size=3))
    texts = [text for text, _ in snippets]
    body = f"[{', '.join(texts)}]" if grouping == "list" else "\n\n".join(texts)
    wrap = draw(
        st.sampled_from(["bare", "```json", "```", "```tool_call", "```python", "tag", "open tag"])
    )
    parts = [wrap_in(text, wrap) for text in texts] if grouping == "each" else [wrap_in(body, wrap)]
    before, after = draw(prose), draw(prose)
    head = before + draw(st.sampled_from(["\n", "\n\n", " "]))
    reply = head + "\n".join(parts) + "\n" + after
    return reply, len(head), [call for _, call in snippets], before + after


TOKENS = [
    *"{}[]\"'`<>/:,#\\\n ",
    "name",
    "arguments",
    "read_file",
    "<tool_call>",
    '"""',
    "```json\n",
]


@st.composite
def truncated_call(draw: st.DrawFn) -> str:
    reply = draw(reply_with_calls())[0]
    return reply[: draw(st.integers(0, len(reply)))]


@st.composite
def mutated_call(draw: st.DrawFn) -> str:
    """A rendered reply with a few characters replaced by syntax-breaking tokens."""
    text = draw(reply_with_calls())[0]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["", *TOKENS])) + text[at + 1 :]
    return text


def _json_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["name", "arguments", "parameters", "function", "x"]) | st.text()
    return st.lists(children) | st.dictionaries(keys, children)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text() | st.sampled_from(TOOLS),
    _json_containers,
    max_leaves=12,
)
any_text = st.one_of(
    st.text(),
    st.lists(st.sampled_from(TOKENS)).map("".join),
    json_values.map(json.dumps),
    truncated_call(),
    mutated_call(),
)


@PROPERTY
@given(any_text)
def test_parse_never_raises(text: str) -> None:
    reply = parse(text)
    for call in reply.calls:
        assert call.name in TOOLS
        assert isinstance(json.loads(call.arguments), dict)
    stream(text, [len(text) // 3, len(text) // 2])


@PROPERTY
@given(reply_with_calls())
def test_any_rendered_call_is_recovered_exactly(case: tuple[str, int, list[Any], str]) -> None:
    reply_text, _, expected, prose_text = case
    reply = parse(reply_text)
    assert calls_of(reply) == expected, reply_text
    assert reply.malformed == []
    assert squash(reply.text) == squash(prose_text)


soup_without_tools = st.lists(st.sampled_from([t for t in TOKENS if t not in TOOLS])).map("".join)


@st.composite
def call_to_unknown_tool(draw: st.DrawFn) -> str:
    obj = {"name": draw(st.text(max_size=12)), "arguments": draw(arguments)}
    return draw(prose) + "\n" + json.dumps(obj) + "\n" + draw(prose)


@PROPERTY
@given(st.one_of(st.text(), soup_without_tools, call_to_unknown_tool()))
def test_text_naming_no_tool_yields_no_call(text: str) -> None:
    assume(not any(tool in text.lower() for tool in TOOLS))
    assert parse(text).calls == []


@PROPERTY
@given(st.one_of(reply_with_calls(), any_text.map(lambda t: (t, len(t), [], ""))), st.data())
def test_stream_matches_parsing_the_whole_text(
    case: tuple[str, int, list[Any], str], data: st.DataObject
) -> None:
    text, first_call, _, _ = case
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    shown, reply = stream(text, cuts)
    whole = parse(text)
    assert calls_of(reply) == calls_of(whole)
    assert reply.malformed == whole.malformed
    assert text.startswith(shown)
    assert len(shown) <= first_call  # no call text is shown before finish()
    assert squash(shown + reply.text) == squash(whole.text)


mixed_text = st.lists(
    st.one_of(reply_with_calls().map(lambda case: case[0]), any_text, prose), max_size=4
).map("".join)


@PROPERTY
@given(mixed_text, st.data())
def test_stream_matches_parsing_mixed_text(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    shown, reply = stream(text, cuts)
    whole = parse(text)
    assert calls_of(reply) == calls_of(whole)
    assert reply.malformed == whole.malformed
    assert text.startswith(shown)
    assert squash(shown + reply.text) == squash(whole.text)


def test_a_call_missing_its_last_closing_brace_is_repaired() -> None:
    """As measured on the 1.5B model: the outer ``}`` of a call is dropped."""
    call = '{"name": "run_python", "arguments": {"code": "print({1: 2})"}'
    text = f"<tool_call>\n{call}\n</tool_call>"
    assert calls_of(parse(text)) == [("run_python", {"code": "print({1: 2})"})]
    cut = '{"name": "run_python", "arguments": {"code": "print(1)'  # cut inside a string
    reply = parse(cut)
    assert reply.calls == [] and "cut off" in reply.malformed[0].reason


def test_a_call_written_like_a_function_is_a_call() -> None:
    """As measured on the 1.5B model: it copies a call shown as ``name({...})`` into its prose."""
    text = 'Mark it done with write_file({"path": "a.md", "content": "x"}) and go on.'
    reply = parse(text)
    assert calls_of(reply) == [("write_file", {"path": "a.md", "content": "x"})]
    assert reply.text == "Mark it done with and go on."
    shown, streamed = stream(text, [20, 23, 30])
    assert calls_of(streamed) == calls_of(reply)
    assert "write_" not in shown  # the name is held back with the call


@pytest.mark.parametrize(
    "text",
    [
        'print({"path": "a.md"})',  # not a tool
        'write_file {"path": "a.md"}',  # no parenthesis
        'xwrite_file({"path": "a.md"})',  # another word
        'write_file({"path": "a.md"}, 2)',  # not one object
    ],
)
def test_a_function_form_that_is_not_a_call_stays_text(text: str) -> None:
    reply = parse(text)
    assert reply.calls == [] and reply.malformed == [] and reply.text == text


def test_a_function_form_call_with_bad_json_is_malformed_with_its_name() -> None:
    reply = parse('run_python({"code": "print("hi")"})')
    assert reply.calls == []
    [bad] = reply.malformed
    assert bad.name == "run_python" and "not valid JSON" in bad.reason
    [call] = as_tool_calls(reply)
    assert call.name == "run_python" and call.arguments == '{"code": "print("hi")"}'


def test_the_stream_shows_a_word_that_cannot_start_a_tool_name() -> None:
    splitter = ToolCallStreamSplitter(TOOLS)
    assert splitter.feed("one two") == "one two"
    assert splitter.feed(" read_") == " "  # it may be read_file({...})
    assert splitter.feed("me twice") == "read_me twice"
