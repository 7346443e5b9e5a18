"""The tool layer's schemas and argument validation: signature, type hints and docstring -> JSON
schema; the model's arguments -> validated keyword arguments (or a message the model can act on);
name clashes; schema-generated calls (``ToolCallingModel``, ``example_value``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest

from agentica import Agent, Function, RunContext, Tool, UsageError, tool
from agentica.messages import ToolDefinition, ToolMessage
from agentica.testing import ScriptedModel, ToolCallingModel, call, example_value, tool_calls
from agentica.tools import ArgumentsError, resolve_functions

# --------------------------------------------------------------------------- helpers and types


def tool_messages(model: ScriptedModel, request: int) -> list[ToolMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolMessage)]


def title_keywords(schema: Any, path: str = "") -> list[str]:
    """Paths of every ``title`` *keyword* in a schema (property names called "title" excluded)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                found.append(path or "/")
            elif key in ("properties", "$defs") and isinstance(value, dict):
                for name, sub in value.items():
                    found.extend(title_keywords(sub, f"{path}/{key}/{name}"))
            else:
                found.extend(title_keywords(value, f"{path}/{key}"))
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            found.extend(title_keywords(item, f"{path}/{i}"))
    return found


class Address(pydantic.BaseModel):
    """A postal address."""

    street: str
    city: str = "Paris"


class Person(pydantic.BaseModel):
    title: str  # a field literally named "title" must survive title stripping
    age: int
    address: Address


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Deps:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix


# --------------------------------------------------------------------------- docstrings


def google_style(city: str, days: int = 3) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    Args:
        city: the city to look up.
        days: how many days to forecast.

    Returns:
        The forecast.
    """
    return f"{city}:{days}"


def numpy_style(city: str, days: int = 3) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    Parameters
    ----------
    city : str
        the city to look up.
    days : int
        how many days to forecast.
    """
    return f"{city}:{days}"


def sphinx_style(city: str, days: int = 3) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    :param city: the city to look up.
    :param days: how many days to forecast.
    :returns: the forecast.
    """
    return f"{city}:{days}"


def epydoc_style(city: str, days: int = 3) -> str:
    """Get the weather forecast.

    Uses the national weather service.

    @param city: the city to look up.
    @param days: how many days to forecast.
    """
    return f"{city}:{days}"


@pytest.mark.parametrize(
    "fn", [google_style, numpy_style, sphinx_style, epydoc_style], ids=lambda f: f.__name__
)
def test_docstring_styles_give_description_and_parameter_descriptions(fn: Any) -> None:
    function = Function.from_callable(fn)

    assert function.description == "Get the weather forecast.\n\nUses the national weather service."
    props = function.parameters["properties"]
    assert props["city"]["description"] == "the city to look up."
    assert props["days"]["description"] == "how many days to forecast."
    assert function.parameters["required"] == ["city"]
    # the sections themselves never leak into the description the model reads
    assert "Args" not in function.description
    assert "param" not in function.description


def test_docstring_without_parameter_sections_is_the_whole_description() -> None:
    @tool
    def ping() -> str:
        """Check that the service is up.

        Returns "pong" when it is.
        """
        return "pong"

    assert ping.description == 'Check that the service is up.\n\nReturns "pong" when it is.'
    assert ping.parameters == {"properties": {}, "type": "object"}


def test_no_docstring_gives_empty_description_and_explicit_description_wins() -> None:
    def bare(x: int) -> int:
        return x

    assert Function.from_callable(bare).description == ""
    assert Function.from_callable(google_style, description="Override.").description == "Override."
    # an explicit empty description is kept, not replaced by the docstring
    assert Function.from_callable(google_style, description="").description == ""


# --------------------------------------------------------------------------- types


def test_defaults_make_parameters_optional_and_appear_in_schema() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False, ratio: float = 0.5) -> str:
        return query

    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"] == {
        "query": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "exact": {"type": "boolean", "default": False},
        "ratio": {"type": "number", "default": 0.5},
    }
    assert search.validate_arguments('{"query": "q"}') == {
        "query": "q",
        "limit": 10,
        "exact": False,
        "ratio": 0.5,
    }


def test_optional_and_pipe_none_accept_null() -> None:
    @tool
    def f(a: Optional[int], b: int | None = None, c: str | None = "x") -> str:  # noqa: UP045
        return ""

    props = f.parameters["properties"]
    nullable_int = [{"type": "integer"}, {"type": "null"}]
    assert props["a"] == {"anyOf": nullable_int}
    assert props["b"] == {"anyOf": nullable_int, "default": None}
    assert props["c"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "x"}
    # Optional without a default is still required (it only allows null)
    assert f.parameters["required"] == ["a"]
    assert f.validate_arguments('{"a": null}') == {"a": None, "b": None, "c": "x"}
    assert f.validate_arguments('{"a": 1, "b": 2, "c": null}') == {"a": 1, "b": 2, "c": None}


def test_literal_becomes_enum_and_is_enforced() -> None:
    @tool
    def convert(unit: Literal["celsius", "fahrenheit"], precision: Literal[0, 1, 2] = 1) -> str:
        return unit

    props = convert.parameters["properties"]
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"], "type": "string"}
    assert props["precision"]["enum"] == [0, 1, 2]
    assert convert.validate_arguments('{"unit": "celsius"}') == {"unit": "celsius", "precision": 1}
    with pytest.raises(ArgumentsError, match="unit"):
        convert.validate_arguments('{"unit": "kelvin"}')


def test_list_and_dict_parameters() -> None:
    @tool
    def tag(ids: list[int], labels: dict[str, str], weights: list[float] | None = None) -> str:
        return ""

    props = tag.parameters["properties"]
    assert props["ids"] == {"type": "array", "items": {"type": "integer"}}
    assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert tag.validate_arguments('{"ids": [1, 2], "labels": {"a": "b"}}') == {
        "ids": [1, 2],
        "labels": {"a": "b"},
        "weights": None,
    }
    with pytest.raises(ArgumentsError, match=r"ids\.1"):
        tag.validate_arguments('{"ids": [1, "two"], "labels": {}}')


def test_nested_pydantic_model_uses_defs_and_refs_and_validates_to_instances() -> None:
    @tool
    def register(person: Person, note: str = "") -> str:
        """Register a person.

        Args:
            person: who to register.
        """
        return person.address.city

    schema = register.parameters
    assert schema["properties"]["person"] == {
        "$ref": "#/$defs/Person",
        "description": "who to register.",
    }
    assert set(schema["$defs"]) == {"Person", "Address"}
    assert schema["$defs"]["Person"]["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Person"]["required"] == ["title", "age", "address"]
    # the model's docstring stays as the description of its definition
    assert schema["$defs"]["Address"]["description"] == "A postal address."

    kwargs = register.validate_arguments(
        '{"person": {"title": "Dr", "age": 40, "address": {"street": "Main"}}}'
    )
    assert isinstance(kwargs["person"], Person)
    assert isinstance(kwargs["person"].address, Address)
    assert kwargs["person"].address.city == "Paris"
    assert register(**kwargs) == "Paris"


def test_dataclass_parameter() -> None:
    @tool
    def move(to: Point, speed: int = 1) -> str:
        return f"{to.x},{to.y}"

    schema = move.parameters
    assert schema["properties"]["to"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer", "default": 0},
    }
    assert schema["$defs"]["Point"]["required"] == ["x"]
    kwargs = move.validate_arguments('{"to": {"x": 3}}')
    assert kwargs["to"] == Point(x=3, y=0)
    assert move(**kwargs) == "3,0"


def test_title_keywords_are_stripped_but_a_property_named_title_is_kept() -> None:
    @tool
    def publish(title: str, author: Person, where: Point | None = None) -> str:
        return title

    schema = publish.parameters
    assert title_keywords(schema) == []
    assert schema["properties"]["title"] == {"type": "string"}
    assert "title" in schema["required"]
    assert schema["$defs"]["Person"]["properties"]["title"] == {"type": "string"}
    # pydantic does generate the titles: the stripping is what removed them
    raw = pydantic.create_model("x", title=(str, ...), author=(Person, ...)).model_json_schema()
    assert title_keywords(raw) != []


def test_stripping_titles_keeps_default_values_that_contain_a_title_key() -> None:
    @tool
    def render(options: dict[str, str] = {"title": "Report"}) -> str:  # noqa: B006
        return options["title"]

    assert render.parameters["properties"]["options"]["default"] == {"title": "Report"}


def test_annotated_field_constraints_and_descriptions_reach_the_schema() -> None:
    @tool
    def page(n: Annotated[int, pydantic.Field(ge=1, le=100, description="page number")]) -> int:
        return n

    assert page.parameters["properties"]["n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "description": "page number",
    }
    with pytest.raises(ArgumentsError, match="n: Input should be greater than or equal to 1"):
        page.validate_arguments('{"n": 0}')


def test_varargs_and_kwargs_are_ignored() -> None:
    @tool
    def flexible(x: int, *args: int, y: str = "y", **kwargs: str) -> str:
        return f"{x}{y}{args}{kwargs}"

    assert set(flexible.parameters["properties"]) == {"x", "y"}
    assert flexible.parameters["required"] == ["x"]
    kwargs = flexible.validate_arguments('{"x": 1, "y": "z", "args": [1], "extra": "e"}')
    assert kwargs == {"x": 1, "y": "z"}  # unknown keys never reach the function
    assert flexible(**kwargs) == "1z(){}"


def test_unannotated_parameter_accepts_any_json() -> None:
    @tool
    def echo(value, times: int = 1):  # type: ignore[no-untyped-def]
        return value

    assert echo.parameters["properties"]["value"] == {}
    assert echo.validate_arguments('{"value": [1, {"a": null}]}')["value"] == [1, {"a": None}]


# --------------------------------------------------------------------------- RunContext


def test_run_context_parameter_is_excluded_from_the_schema() -> None:
    @tool
    def plain(ctx: RunContext, query: str) -> str:  # type: ignore[type-arg]
        return query

    @tool
    def typed(query: str, context: RunContext[Deps], limit: int = 1) -> str:
        return query

    assert plain.context_param == "ctx"
    assert typed.context_param == "context"
    assert plain.parameters["properties"] == {"query": {"type": "string"}}
    assert set(typed.parameters["properties"]) == {"query", "limit"}
    assert "context" not in typed.parameters.get("required", [])
    # the model cannot smuggle a value in for it either
    assert typed.validate_arguments('{"query": "q", "context": 1}') == {"query": "q", "limit": 1}


# A module written with postponed annotations whose deps type exists only for type checkers: the
# RunContext parameter must still be recognised, and the other hints must still resolve.
_POSTPONED_SOURCE = '''
from __future__ import annotations
from typing import TYPE_CHECKING
import pydantic
from agentica.tools import RunContext
if TYPE_CHECKING:
    from decimal import Decimal

class Item(pydantic.BaseModel):
    name: str

def lookup(ctx: RunContext[Decimal], item: Item, n: int = 1) -> str:
    """Look an item up.

    Args:
        item: the item.
    """
    return f"{ctx.deps}:{item.name}:{n}"
'''


async def test_run_context_with_a_type_checking_only_deps_type_in_a_postponed_module() -> None:
    namespace: dict[str, Any] = {"__name__": "postponed_tools"}
    exec(compile(_POSTPONED_SOURCE, "<postponed_tools>", "exec"), namespace)

    lookup = Function.from_callable(namespace["lookup"])

    assert lookup.context_param == "ctx"
    assert set(lookup.parameters["properties"]) == {"item", "n"}
    assert lookup.parameters["properties"]["item"]["$ref"] == "#/$defs/Item"
    assert lookup.parameters["properties"]["item"]["description"] == "the item."

    model = ScriptedModel([tool_calls(call("lookup", item={"name": "bolt"}, n=2)), "done"])
    await Agent(model=model, tools=[lookup]).run("go", deps="D")
    assert tool_messages(model, 1)[0].content == "D:bolt:2"


# --------------------------------------------------------------------------- names and errors


@pytest.mark.parametrize("name", ["has space", "dots.not.allowed", "x" * 65, "émoji", "slash/name"])
def test_invalid_tool_names_raise_usage_error(name: str) -> None:
    with pytest.raises(UsageError, match="is not allowed"):
        tool(name=name)(google_style)


@pytest.mark.parametrize("name", ["a", "get_weather", "get-weather-2", "X" * 64])
def test_valid_tool_names(name: str) -> None:
    assert Function.from_callable(google_style, name=name).name == name


def test_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(UsageError, match="'<lambda>' is not allowed"):
        Function.from_callable(lambda x: x)
    named = Function.from_callable(lambda x: x, name="identity")
    assert named.name == "identity"
    assert named(5) == 5


class NotJson:
    """A plain class pydantic cannot describe in JSON schema."""


def test_unschemable_annotation_raises_usage_error_with_a_clear_message() -> None:
    def uses_object(thing: NotJson) -> str:
        return ""

    with pytest.raises(UsageError) as info:
        Function.from_callable(uses_object)
    message = str(info.value)
    assert "cannot build a JSON schema for tool 'uses_object'" in message
    assert "JSON-compatible type hints" in message
    assert isinstance(info.value.__cause__, pydantic.PydanticUserError)


def test_non_callable_is_rejected() -> None:
    with pytest.raises(UsageError, match="must be callable, got int"):
        Function.from_callable(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- options


async def test_tool_options_land_in_the_function_and_its_definition() -> None:
    @tool(name="forecast", description="Weather.", timeout=2.5, exclusive=True, strict=True)
    async def get_weather(city: str) -> str:
        """Ignored: the explicit description wins."""
        return city

    assert isinstance(get_weather, Function)
    assert get_weather.name == "forecast"
    assert get_weather.description == "Weather."
    assert get_weather.timeout == 2.5
    assert get_weather.exclusive is True
    assert get_weather.strict is True
    assert get_weather.is_async is True
    assert get_weather.definition == ToolDefinition(
        name="forecast",
        description="Weather.",
        parameters={
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "type": "object",
        },
        strict=True,
    )

    # the model is offered exactly that definition, and calls reach it by its new name
    model = ScriptedModel([tool_calls(call("forecast", city="Oslo")), "done"])
    await Agent(model=model, tools=[get_weather]).run("go")
    assert list(model.requests[0].tools) == [get_weather.definition]
    assert tool_messages(model, 1)[0].content == "Oslo"


def test_defaults_of_the_options() -> None:
    @tool
    def plain(x: int) -> int:
        return x

    assert (plain.timeout, plain.exclusive, plain.strict, plain.is_async) == (
        None,
        False,
        False,
        False,
    )
    assert plain.definition.strict is False
    assert plain.definition is plain.definition  # built once


def test_options_given_to_an_existing_function_are_applied() -> None:
    @tool
    def base(x: int) -> int:
        return x

    renamed = Function.from_callable(
        base, name="other", description="D", timeout=1, exclusive=True, strict=True
    )
    assert renamed is not base
    assert (renamed.name, renamed.description, renamed.timeout) == ("other", "D", 1)
    assert renamed.exclusive is True
    assert renamed.strict is True
    assert renamed.definition.strict is True
    assert base.name == "base"
    assert base.strict is False


async def test_tool_timeout_option_is_enforced() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        import asyncio

        await asyncio.sleep(5)
        return "never"

    model = ScriptedModel([tool_calls("slow"), "done"])
    response = await Agent(model=model, tools=[slow]).run("go")
    message = tool_messages(model, 1)[0]
    assert message.is_error
    assert message.content == "Tool 'slow' timed out after 0.05 s and was abandoned."
    assert response.content == "done"


# --------------------------------------------------------------------------- argument validation


@tool
def square(n: int) -> int:
    """Square a number."""
    return n * n


def test_validation_error_messages_name_the_argument_and_ask_for_a_new_call() -> None:
    with pytest.raises(ArgumentsError) as wrong:
        square.validate_arguments('{"n": "abc"}')
    text = str(wrong.value)
    assert text.startswith("Invalid arguments for tool 'square':")
    assert "- n: Input should be a valid integer" in text
    assert "'abc'" in text
    assert "Expected arguments: {n}" in text
    assert text.endswith("Call the tool again with corrected arguments.")

    with pytest.raises(ArgumentsError, match="- n: this required argument is missing"):
        square.validate_arguments("{}")
    with pytest.raises(ArgumentsError, match="the arguments are not valid JSON") as broken:
        square.validate_arguments('{"n": 3')
    assert "newlines and quotes inside strings escaped" in str(broken.value)
    with pytest.raises(ArgumentsError, match="must be a JSON object with named arguments, not '"):
        square.validate_arguments("[3]")

    optional = Function.from_callable(google_style)
    with pytest.raises(ArgumentsError, match=r"Expected arguments: \{city, days\?\}"):
        optional.validate_arguments('{"days": 1}')


async def test_arguments_error_is_a_tool_error_of_the_tree_and_carries_the_call() -> None:
    from agentica import errors
    from agentica.tools import function

    assert ArgumentsError is errors.ArgumentsError is function.ArgumentsError
    assert "ArgumentsError" in errors.__all__
    with pytest.raises(errors.AgenticaError) as caught:
        square.validate_arguments('{"n": "abc"}')
    wrong = caught.value
    # bad input from the model, shown to the model like a tool's own failure; not a code mistake
    assert isinstance(wrong, ArgumentsError) and isinstance(wrong, errors.ToolError)
    assert not isinstance(wrong, errors.UsageError)
    assert wrong.tool == "square"
    assert wrong.arguments == '{"n": "abc"}'
    assert str(wrong).startswith("Invalid arguments for tool 'square':")
    # what the model sees for the call is the same message
    model = ScriptedModel([tool_calls(call("square", '{"n": "abc"}')), "done"])
    await Agent(model=model, tools=[square]).run("go")
    (result,) = tool_messages(model, 1)
    assert result.is_error and result.content == str(wrong)


@pytest.mark.parametrize("raw", ["", "   ", "\n", "{}"])
def test_empty_arguments_are_an_empty_object(raw: str) -> None:
    @tool
    def ping(verbose: bool = False) -> str:
        return "pong"

    assert ping.validate_arguments(raw) == {"verbose": False}


@pytest.mark.parametrize(
    ("bad_arguments", "expected"),
    [
        ('{"n": "abc"}', "n: Input should be a valid integer"),
        ("{}", "n: this required argument is missing"),
        ('{"n": 3', "the arguments are not valid JSON"),
        ("", "n: this required argument is missing"),
    ],
    ids=["wrong-type", "missing", "invalid-json", "empty-string"],
)
async def test_validation_error_reaches_the_model_and_it_can_correct_itself(
    bad_arguments: str, expected: str
) -> None:
    model = ScriptedModel(
        [
            tool_calls(call("square", bad_arguments)),
            tool_calls(call("square", n=7)),
            "49 it is",
        ]
    )
    response = await Agent(model=model, tools=[square]).run("square 7")

    assert response.content == "49 it is"
    assert response.stop_reason == "completed"
    first = tool_messages(model, 1)
    assert len(first) == 1
    assert first[0].is_error
    assert first[0].name == "square"
    assert expected in first[0].content
    assert "'square'" in first[0].content
    assert "Expected arguments: {n}" in first[0].content  # names the argument in every case
    assert "Call the tool again" in first[0].content
    second = tool_messages(model, 2)[-1]
    assert (second.content, second.is_error) == ("49", False)
    assert [c.status for c in response.tool_calls] == ["error", "success"]
    assert response.tool_calls[0].exception is None  # the tool itself never ran


async def test_empty_argument_string_calls_a_tool_without_required_arguments() -> None:
    calls: list[bool] = []

    @tool
    async def ping(verbose: bool = False) -> str:
        calls.append(verbose)
        return "pong"

    model = ScriptedModel([tool_calls(call("ping", "")), "done"])
    await Agent(model=model, tools=[ping]).run("go")
    assert calls == [False]
    assert tool_messages(model, 1)[0].content == "pong"


async def test_unknown_tool_name_is_reported_with_the_available_tools() -> None:
    model = ScriptedModel([tool_calls(call("sqare", n=2)), tool_calls(call("square", n=2)), "4"])
    response = await Agent(model=model, tools=[square, google_style]).run("go")
    error = tool_messages(model, 1)[0]
    assert error.is_error
    assert error.content.startswith("Unknown tool 'sqare'. Available tools: square, google_style.")
    assert tool_messages(model, 2)[-1].content == "4"
    assert response.content == "4"


# --------------------------------------------------------------------------- resolve_functions


def test_resolve_functions_rejects_two_different_tools_with_the_same_name() -> None:
    first = Function.from_callable(google_style)
    second = Function.from_callable(numpy_style, name="google_style")
    with pytest.raises(UsageError, match="two tools are named 'google_style'"):
        resolve_functions([first, second])
    # a Tool group clashing with a different loose function is caught too
    with pytest.raises(UsageError, match="two tools are named 'square'"):
        resolve_functions([Tool("group", [square]), Function.from_callable(t_ints, name="square")])
    # the same plain function given twice is one tool, not a clash
    assert list(resolve_functions([google_style, google_style])) == ["google_style"]


def test_resolve_functions_accepts_the_same_function_twice() -> None:
    resolved = resolve_functions([square, square, Tool("math", [google_style])])
    assert list(resolved) == ["square", "google_style"]
    assert resolved["square"] is square
    assert isinstance(resolved["google_style"], Function)


def test_resolve_functions_wraps_plain_callables_and_renaming_resolves_a_clash() -> None:
    resolved = resolve_functions([google_style, Function.from_callable(numpy_style, name="w2")])
    assert set(resolved) == {"google_style", "w2"}
    assert resolved["google_style"].entrypoint is google_style


@pytest.mark.parametrize("bad", [42, "search", None, {"name": "x"}])
def test_non_callable_in_tools_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError, match=r"cannot use .* as a tool"):
        resolve_functions([square, bad])


async def test_agent_with_a_non_callable_tool_fails_before_calling_the_model() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model=model, tools=[square, 42])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="cannot use 42 as a tool"):
        await agent.run("go")
    assert model.requests == []


async def test_agent_with_clashing_tool_names_fails_before_calling_the_model() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model=model, tools=[square, Function.from_callable(google_style, name="square")])
    with pytest.raises(UsageError, match="two tools are named 'square'"):
        await agent.run("go")
    assert model.requests == []


# --------------------------------------------------------------------------- generated calls


@tool
def t_ints(a: int, b: int = 5) -> int:
    return a + b


@tool
def t_strs(s: str, suffix: str = "!") -> str:
    return s + suffix


@tool
async def t_literal(mode: Literal["fast", "slow"], level: Literal[1, 2] | None = None) -> str:
    return f"{mode}/{level}"


@tool
async def t_nested(
    person: Person, tags: list[str], where: Point, extra: Address | None = None
) -> str:
    return f"{person.address.street}|{person.title}|{len(tags)}|{where.x}"


@tool
def t_constrained(
    n: Annotated[int, pydantic.Field(ge=3)], code: Annotated[str, pydantic.Field(min_length=4)]
) -> str:
    return f"{n}:{code}"


@tool
def t_context(ctx: RunContext, flag: bool) -> str:  # type: ignore[type-arg]
    return f"{ctx.deps}:{flag}"


async def test_tool_calling_model_calls_every_tool_with_valid_generated_arguments() -> None:
    tools = [t_ints, t_strs, t_literal, t_nested, t_constrained, t_context]
    model = ToolCallingModel()
    response = await Agent(model=model, tools=tools).run("go", deps="D")

    assert [c.name for c in response.tool_calls] == [t.name for t in tools]
    failures = {c.name: c.error for c in response.tool_calls if c.status != "success"}
    assert failures == {}
    assert json.loads(response.content or "") == {
        "t_ints": "5",
        "t_strs": "a!",
        "t_literal": "fast/None",
        "t_nested": "a|a|0|0",
        "t_constrained": "3:aaaa",
        "t_context": "D:False",
    }
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer"}, 0),
        ({"type": "integer", "minimum": 4}, 4),
        ({"type": "number"}, 0.0),
        ({"type": "boolean"}, False),
        ({"type": "string", "minLength": 3}, "aaa"),
        ({"type": "string"}, "a"),
        ({"enum": ["b", "c"], "type": "string"}, "b"),
        ({"const": 7}, 7),
        ({"type": "integer", "default": 9}, 9),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 0),
        ({"type": ["null", "string"]}, "a"),
        ({"type": "array", "items": {"type": "integer"}}, []),
        ({"type": "array", "items": {"type": "string"}, "minItems": 2}, ["a", "a"]),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/P"}, "o": {"type": "integer"}},
                "required": ["p"],
                "$defs": {"P": {"type": "object", "properties": {"x": {"type": "string"}}}},
            },
            {"p": {"x": "a"}},
        ),
    ],
)
def test_example_value(schema: dict[str, Any], expected: Any) -> None:
    assert example_value(schema) == expected


@pytest.mark.parametrize(
    "fn", [t_ints, t_strs, t_literal, t_nested, t_constrained, google_style, numpy_style]
)
def test_example_value_of_a_tool_schema_passes_its_validation(fn: Any) -> None:
    function = Function.from_callable(fn)
    function.validate_arguments(json.dumps(example_value(function.parameters)))


def test_example_value_honours_exclusive_minimum() -> None:
    @tool
    def positive(n: Annotated[int, pydantic.Field(gt=0)]) -> int:
        return n

    positive.validate_arguments(json.dumps(example_value(positive.parameters)))


# --------------------------------------------------------------------------- reserved names


def test_parameter_named_like_a_basemodel_attribute_builds_without_warnings() -> None:
    import warnings

    def query(sql: str, schema: str = "public") -> str:
        return f"{schema}:{sql}"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function = Function.from_callable(query)
    assert function.validate_arguments('{"sql": "s", "schema": "x"}') == {"sql": "s", "schema": "x"}


def test_reserved_parameter_names_keep_their_names_in_schema_and_call() -> None:
    def odd(json: str, model_config: int = 1, _private: bool = False) -> str:
        return f"{json}:{model_config}:{_private}"

    function = Function.from_callable(odd)
    assert list(function.parameters["properties"]) == ["json", "model_config", "_private"]
    kwargs = function.validate_arguments('{"json": "j", "model_config": 2, "_private": true}')
    assert kwargs == {"json": "j", "model_config": 2, "_private": True}
    assert odd(**kwargs) == "j:2:True"
    error = ""
    try:
        function.validate_arguments('{"model_config": "x"}')
    except Exception as exc:  # ArgumentsError: its text names the argument as the model knows it
        error = str(exc)
    assert "- json: this required argument is missing" in error
    assert "model_config" in error


def test_arguments_cut_off_by_the_length_limit_say_so() -> None:
    """As measured on the 1.5B model: a file written as a runaway list stopped at max_tokens,
    five times the same; 'write valid JSON' does not tell it what went wrong."""

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        return path

    cut = '{"path": "upper.txt", "content": "' + "NAME\\n" * 300
    with pytest.raises(ArgumentsError, match=r"stop in the middle .* reached its length limit"):
        write_file.validate_arguments(cut)
    with pytest.raises(ArgumentsError, match="the arguments are not valid JSON"):
        write_file.validate_arguments('{"path": "a.txt", "content": "short')


def test_unescaped_quotes_in_a_string_argument_are_escaped() -> None:
    """As measured on the 1.5B model: a file's content with a docstring, written eight times
    over as invalid JSON."""

    @tool
    def write_file(path: str, content: str, overwrite: bool = True) -> str:
        """Write a file."""
        return path

    raw = (
        '{"path": "/stats.py", "content": "def mean(v):\\n    """Mean."""\\n'
        '    return sum(v) / len(v)\\n", "overwrite": true}'
    )
    values = write_file.validate_arguments(raw)
    assert values["content"] == 'def mean(v):\n    """Mean."""\n    return sum(v) / len(v)\n'
    assert values["path"] == "/stats.py" and values["overwrite"] is True
    # and one closing brace too many after them (seen: edit_file with a docstring, four times)
    values = write_file.validate_arguments(raw + "}")
    assert values["content"].startswith('def mean(v):\n    """Mean."""') and values["overwrite"]
    # or two (seen on fix-unique: edit_file's arguments ending "false}}}"); four are not
    values = write_file.validate_arguments(raw + "}}")
    assert values["content"].startswith('def mean(v):\n    """Mean."""') and values["overwrite"]
    with pytest.raises(ArgumentsError, match="not valid JSON"):
        write_file.validate_arguments(raw + "}" * 4)
    # a key that is not the tool's, or a value that is no string, is not guessed at
    for broken in ('{"path": "a", "text": "say "hi""}', '{"path": "a", "content": x"y"}'):
        with pytest.raises(ArgumentsError, match="not valid JSON"):
            write_file.validate_arguments(broken)
