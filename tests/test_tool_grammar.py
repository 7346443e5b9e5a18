"""The tool-call grammar for llama.cpp (``agentica.models.grammar``): what it allows, when it
triggers, and how a model that offers it falls back when the server refuses it. (Its effect on
the real embedded model is tested in ``test_local_model.py``.)"""

from __future__ import annotations

import json
import re

from agentica.errors import ModelHTTPError
from agentica.messages import ToolDefinition, UserMessage
from agentica.models.base import ModelRequest, ModelSettings
from agentica.models.grammar import (
    arguments_grammar,
    call_start_fields,
    is_grammar_error,
    opened_call,
    tool_call_grammar,
)
from agentica.models.local import LocalModel

READ = ToolDefinition(
    name="read_file", description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}},
                "required": ["path"]},
)  # fmt: skip
RUN = ToolDefinition(name="run.python", description="Run code.", parameters={"type": "object"})


def test_the_grammar_names_only_the_offered_tools_with_their_closed_schemas() -> None:
    grammar = tool_call_grammar([READ, RUN])
    assert grammar.startswith("%llguidance {}\nstart: call")
    call = json.loads(grammar.split("call: %json ", 1)[1])
    names = [branch["properties"]["name"]["const"] for branch in call["anyOf"]]
    assert names == ["read_file", "run.python"]
    arguments = call["anyOf"][0]["properties"]["arguments"]
    assert arguments["required"] == ["path"] and arguments["additionalProperties"] is False
    assert call["x-guidance"] == {"lenient": True}
    assert "{0,3}" in grammar and "{0,3}" not in tool_call_grammar([READ], parallel=False)


def test_a_reply_is_free_until_a_call_begins_then_ends_after_the_tool_s_name() -> None:
    """llama.cpp applies an llguidance grammar from the first token whatever the trigger (the
    0.5B model, asked what a prime is with tools offered, had to call write_file), so the lazy
    part is a GBNF grammar: it starts at a call's first letter of a name and ends the reply
    after the name (and a comma: one token can be ``",``)."""
    fields = call_start_fields([READ, RUN])
    assert fields["grammar_lazy"] is True
    trigger = re.compile(fields["grammar_triggers"][0]["value"])
    match = trigger.match('Let me look.\n```json\n{"name": "read_file", "arguments"')
    assert match and match.group(1) == '{"name": "r'  # (the token that ends it is fed whole)
    assert trigger.match('{ "name" : "run.python"')
    assert not trigger.match('{"name": "Ann", "age": 7}')  # other JSON in an answer stays free
    assert not fields["grammar"].startswith("%llguidance")
    assert 'name ::= "read_file" | "run.python"' in fields["grammar"]
    # the reply that ended there is continued under the arguments' grammar
    assert opened_call('Sure.\n{"name": "read_file"', [READ, RUN]) == (READ, False)
    assert opened_call('{ "name": "run.python" ,', [READ, RUN]) == (RUN, True)
    assert opened_call('{"name": "write_file"', [READ, RUN]) is None
    assert opened_call("The answer is 4.", [READ, RUN]) is None
    rest = arguments_grammar(READ)
    assert rest.startswith("%llguidance {}\nstart: SEP args END\n") and "*,[" in rest
    assert "*,[" not in arguments_grammar(READ, comma=True)
    schema = json.loads(rest.split("args: %json ", 1)[1])
    assert schema["required"] == ["path"] and schema["additionalProperties"] is False


def test_a_refused_grammar_is_dropped_for_good() -> None:
    model = LocalModel("qwen2.5-coder-0.5b-instruct", tool_grammar=True)
    request = ModelRequest(messages=[UserMessage(content="hi")], tools=[READ],
                           settings=ModelSettings())  # fmt: skip
    assert "grammar" in model.build_body(request, stream=False)
    refused = ModelHTTPError("failed to parse grammar", status=400, body='{"error": "grammar"}')
    other = ModelHTTPError("out of memory", status=500, body="")
    assert is_grammar_error(refused) and not is_grammar_error(other)
    assert not model._drop_grammar(other, request) and model.tool_grammar
    assert model._drop_grammar(refused, request) and not model.tool_grammar
    assert "grammar" not in model.build_body(request, stream=False)
    assert "grammar" not in LocalModel("qwen2.5-coder-0.5b-instruct").build_body(
        request, stream=False
    )


def test_definitions_of_each_tool_move_to_the_grammar_root_under_its_own_names() -> None:
    item = {"type": "object", "properties": {"content": {"type": "string"}}}
    todos = ToolDefinition(
        name="write_todos", description="Save the plan.",
        parameters={"type": "object", "$defs": {"Item": item},
                    "properties": {"todos": {"type": "array", "items": {"$ref": "#/$defs/Item"}}}},
    )  # fmt: skip
    legacy = ToolDefinition(
        name="old", description="draft-07 definitions",
        parameters={"type": "object", "definitions": {"Item": {"type": "integer"}},
                    "properties": {"n": {"$ref": "#/definitions/Item"}}},
    )  # fmt: skip
    call = json.loads(tool_call_grammar([todos, legacy]).split("call: %json ", 1)[1])
    assert call["$defs"] == {"t0_Item": item, "t1_Item": {"type": "integer"}}
    first = call["anyOf"][0]["properties"]["arguments"]
    assert first["properties"]["todos"]["items"] == {"$ref": "#/$defs/t0_Item"}
    assert "$defs" not in first
    second = call["anyOf"][1]["properties"]["arguments"]
    assert second["properties"]["n"] == {"$ref": "#/$defs/t1_Item"}


def test_a_required_call_is_held_to_the_offered_tools_names() -> None:
    """Seen: a small model forced to call a tool named write_todos, kept from it that turn,
    six times over ("Unknown tool"). The opened call must go on with an offered tool's name."""
    model = LocalModel("qwen2.5-coder-0.5b-instruct")
    required = ModelSettings(tool_choice="required")
    request = ModelRequest(messages=[UserMessage(content="hi")], tools=[READ, RUN],
                           settings=required)  # fmt: skip
    body = model.build_body(request, stream=False)
    assert body["prompt"].endswith('{"name": "')
    assert body["grammar"] == (
        '%llguidance {}\nstart: NAME REST\nNAME: "read_file\\"" | "run.python\\""\n'
        "REST: /(.|\\n)*/\n"
    )
    # the model's own choice, or a named tool (its name is written for it), get no grammar
    for choice in (None, "read_file"):
        free = ModelRequest(messages=request.messages, tools=[READ, RUN],
                            settings=ModelSettings(tool_choice=choice))  # fmt: skip
        assert "grammar" not in model.build_body(free, stream=False)
    # a server that cannot build it: dropped for good, the request sent again without it
    refused = ModelHTTPError("failed to parse grammar", status=400, body='{"error": "grammar"}')
    assert model._drop_grammar(refused, request)
    assert "grammar" not in model.build_body(request, stream=False)
    assert not model._drop_grammar(refused, request)  # (then the error is the caller's)


def test_under_the_tool_grammar_a_required_call_is_a_whole_call_of_the_allowed_tools() -> None:
    """A call opened in the prompt is past the lazy grammar's trigger, so it would run free:
    with ``tool_grammar`` a required call is sampled whole under the (non-lazy) grammar of the
    tools it may name, and nothing is written for the model."""
    model = LocalModel("qwen2.5-coder-0.5b-instruct", tool_grammar=True)
    ask = [UserMessage(content="hi")]
    for choice, names in (("read_file", ["read_file"]), ("required", ["read_file", "run.python"])):
        request = ModelRequest(messages=ask, tools=[READ, RUN],
                               settings=ModelSettings(tool_choice=choice))  # fmt: skip
        body = model.build_body(request, stream=False)
        assert body["prompt"].endswith("<|im_start|>assistant\n")
        assert "grammar_lazy" not in body and "grammar_triggers" not in body
        call = json.loads(body["grammar"].split("call: %json ", 1)[1])
        assert [b["properties"]["name"]["const"] for b in call["anyOf"]] == names
        assert body["grammar"].startswith("%llguidance {}\nstart: call\n")  # one call
        _names, first_only, prefill, _code = model._tool_policy(request)
        assert first_only and prefill == ""
    free = ModelRequest(messages=ask, tools=[READ, RUN])
    assert model.build_body(free, stream=False)["grammar_lazy"] is True


def test_a_required_python_call_is_written_as_a_fenced_block() -> None:
    """Seen on the 1.5B model, forced to call run_python after an answer from its head: the
    script inside the JSON string on one line (``with open(...) as f: rows = ... total = 0 for
    row in rows: ...``), the same SyntaxError after every hint. The call's code is now the
    fenced block the model writes after ```python, lines and all (whatever it writes there is
    the code, as it was inside the opened JSON string); an empty block is no call; other tools
    are opened as JSON."""
    from agentica.messages import Usage

    code_tool = ToolDefinition(
        name="run_python", description="Run Python code.",
        parameters={"type": "object", "properties": {"code": {"type": "string"}},
                    "required": ["code"]},
    )  # fmt: skip
    model = LocalModel("qwen2.5-coder-0.5b-instruct")
    request = ModelRequest(messages=[UserMessage(content="hi")], tools=[READ, code_tool],
                           settings=ModelSettings(tool_choice="run_python"))  # fmt: skip
    body = model.build_body(request, stream=False)
    assert body["prompt"].endswith("<|im_start|>assistant\n```python\n")
    assert "```" in body["stop"]
    policy = model._tool_policy(request)
    assert policy[2:] == ("```python\n", "run_python")
    script = (
        "import csv\nwith open('scores.csv') as f:\n    rows = list(csv.reader(f))\n"
        "print(len(rows))"
    )
    message = model._message(script + "\n", policy, Usage(), "stop")
    (call,) = message.tool_calls
    assert call.name == "run_python" and json.loads(call.arguments) == {"code": script}
    assert message.content is None
    empty = model._message("\n", policy, Usage(), "stop")
    assert not empty.tool_calls and empty.content is None
    # the 0.5B model wrote a JSON call in the block: read as a call (of an offered tool only)
    as_json = '{"name": "run_python", "arguments": {"code": "print(1)"}}\n'
    (call,) = model._message(as_json, policy, Usage(), "stop").tool_calls
    assert json.loads(call.arguments) == {"code": "print(1)"}
    # a tool whose code is not Python, or whose first argument is not `code`, is opened as JSON
    read = ModelRequest(messages=request.messages, tools=[READ, code_tool],
                        settings=ModelSettings(tool_choice="read_file"))  # fmt: skip
    assert model.build_body(read, stream=False)["prompt"].endswith('{"path": "')
    assert "```" not in model.build_body(read, stream=False)["stop"]
