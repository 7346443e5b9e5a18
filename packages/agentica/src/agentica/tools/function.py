"""``Function``: a tool's schema plus its entry point, and the ``@tool`` decorator.

The schema comes from the signature, the type hints and the docstring (Google, NumPy, Sphinx or
Epydoc style): pydantic builds a model of the arguments, which both gives the JSON schema the model
sees and validates the arguments the model sends. A parameter annotated ``RunContext`` is filled
by the engine and left out of the schema.

``@tool`` works on ``def`` and ``async def``, bare or with options, on functions and on methods of a
``Tool`` subclass. An ``async def`` is always awaited; a ``def`` runs on the engine's thread pool,
and if it returns an awaitable (a sync wrapper around a coroutine) that is awaited too, so a
coroutine object never reaches the model.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any, overload

import pydantic
from pydantic import ValidationError

from agentica.errors import ArgumentsError, UsageError
from agentica.messages import ToolDefinition
from agentica.tools.context import RunContext
from agentica.tools.repair import repair_quotes

__all__ = ["ArgumentsError", "Function", "tool"]

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SCHEMA_CONTEXT = "agentica:context"  # the keyword of the RunContext (no schema's argument)


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _reserved(name: str) -> bool:
    """Names pydantic cannot use as field names (they clash with its own attributes)."""
    return name.startswith(("_", "model_")) or hasattr(pydantic.BaseModel, name)


def _is_context_annotation(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, RunContext)


def _strip_titles(schema: Any) -> Any:
    """Remove pydantic's auto-generated ``title`` keywords (tokens the model does not need)."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("default", "const", "enum", "examples"):  # values, not schemas
                out[key] = value
            elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description and the per-parameter descriptions of a docstring."""
    doc = inspect.cleandoc(doc)
    if not re.search(r"^\s*(Args|Arguments|Parameters|Params)\s*:?\s*$|[:@]param\s", doc, re.M):
        return doc, {}
    import docstring_parser

    parsed = docstring_parser.parse(doc)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: p.description for p in parsed.params if p.description}
    return "\n\n".join(parts), params


def _type_hints(source: Any) -> dict[str, Any]:
    """The resolved type hints of ``source``; one unresolvable hint does not lose the others.

    With postponed annotations, ``RunContext[Deps]`` where ``Deps`` is imported only for type
    checkers cannot be evaluated: it is still recognised as the context parameter.
    """
    try:
        return typing.get_type_hints(source, include_extras=True)
    except Exception:
        pass
    globalns = getattr(inspect.unwrap(source), "__globals__", None) or {}
    hints: dict[str, Any] = {}
    for name, annotation in getattr(source, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, globalns)
            except Exception:
                base = globalns.get(annotation.split("[", 1)[0].strip())
                if not _is_context_annotation(base):
                    continue  # left to pydantic, which reports it if it cannot resolve it
                annotation = base
        hints[name] = annotation
    return hints


def _argument_fields(
    params: list[inspect.Parameter], hints: dict[str, Any], param_docs: dict[str, str]
) -> tuple[dict[str, Any], str | None]:
    """The pydantic fields of the arguments the model gives (``*args`` and ``**kwargs`` left
    out), and the name of the parameter that receives the ``RunContext``, if any."""
    fields: dict[str, Any] = {}
    context_param = None
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        annotation = hints.get(p.name, p.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        if _is_context_annotation(annotation):
            context_param = p.name
            continue
        default = ... if p.default is inspect.Parameter.empty else p.default
        options: dict[str, Any] = {}
        if doc := param_docs.get(p.name):
            options["description"] = doc
        attr = p.name
        if _reserved(p.name):
            attr, options["alias"] = f"arg_{len(fields)}_{p.name.strip('_')}", p.name
        fields[attr] = (annotation, pydantic.Field(default, **options))
    return fields, context_param


def _arguments_model(
    tool_name: str, fields: dict[str, Any]
) -> tuple[type[pydantic.BaseModel], dict[str, Any]]:
    """The pydantic model validating a tool's arguments, and the JSON schema the model sees;
    ``UsageError`` when the type hints cannot make one."""
    try:
        args_model = pydantic.create_model(
            f"{tool_name}_arguments",
            __config__=pydantic.ConfigDict(arbitrary_types_allowed=True),
            **fields,
        )
        schema = _strip_titles(args_model.model_json_schema())
    except (
        pydantic.PydanticUserError,
        pydantic.PydanticSchemaGenerationError,
        TypeError,
    ) as exc:
        raise UsageError(
            f"cannot build a JSON schema for tool {tool_name!r}: {exc}. Use JSON-compatible "
            "type hints (str, int, float, bool, list, dict, Literal, pydantic models)."
        ) from exc
    return args_model, schema


def _nests_a_call(arguments: str, properties: dict[str, Any]) -> bool:
    """Whether the model sent ``{"name": ..., "arguments": ...}`` as a tool's arguments."""
    if "name" in properties or '"arguments"' not in arguments:
        return False
    try:
        data = json.loads(arguments)
    except ValueError:
        return arguments.lstrip().startswith('{"name"')
    return isinstance(data, dict) and {"name", "arguments"} <= data.keys()


class _AnyArguments(pydantic.BaseModel):
    """The arguments of a tool described by a JSON schema only (``Function.from_schema``): any
    JSON object, checked against the schema by ``_schema_check``."""

    model_config = pydantic.ConfigDict(extra="allow")


def _schema_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], list[str]]:
    """A check of arguments against ``schema`` (JSON Schema, the draft it names or 2020-12):
    what is wrong, as lines for the model. A schema that is itself invalid checks nothing (the
    tool's owner checks the arguments)."""
    import jsonschema

    try:
        kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        kind.check_schema(schema)
    except jsonschema.SchemaError:
        return lambda _values: []
    validator = kind(schema)

    def check(values: dict[str, Any]) -> list[str]:
        try:
            found = list(validator.iter_errors(values))
        except Exception:  # a reference the schema cannot resolve, ...: the owner checks
            return []
        problems = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        return [
            f"- {'.'.join(str(p) for p in e.absolute_path) or 'arguments'}: {e.message:.300}"
            for e in problems[:10]
        ]

    return check


def _cut_off(error: str, arguments: str) -> bool:
    """Whether invalid JSON arguments were cut off by the reply's length limit (long text that
    stops inside a string), not written wrongly."""
    return "EOF" in error and len(arguments) > 1000


class Function:
    """A tool the model can call: name, description, JSON schema and entry point.

    Build one with ``@tool``, ``Function.from_callable(fn)``, or by passing a plain function in
    ``Agent(tools=[...])``. Calling a ``Function`` calls the underlying function unchanged.

    Attributes:
        timeout: seconds one call may take (``None``: the engine's default).
        exclusive: the call must not run alongside other calls of its turn (it runs alone, in
            call order); use it for tools with side effects that others may observe.
        context_param: the name of the parameter that receives the ``RunContext``, if any.
    """

    __slots__ = (
        "__weakref__",
        "_args_model",
        "_check",
        "_definition",
        "_field_names",
        "context_param",
        "description",
        "entrypoint",
        "exclusive",
        "is_async",
        "is_method",
        "name",
        "parameters",
        "strict",
        "timeout",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        entrypoint: Callable[..., Any],
        args_model: type[pydantic.BaseModel],
        context_param: str | None = None,
        is_async: bool = False,
        is_method: bool = False,
        timeout: float | None = None,
        exclusive: bool = False,
        strict: bool = False,
        check: Callable[[dict[str, Any]], list[str]] | None = None,
    ) -> None:
        if not _NAME_RE.match(name):
            raise UsageError(
                f"tool name {name!r} is not allowed: use 1-64 letters, digits, '_' or '-'"
            )
        self.name = name
        self.description = description
        self.parameters = parameters
        self.entrypoint = entrypoint
        self._args_model = args_model
        # (keyword the function takes, attribute of the validated model); they differ only for
        # parameter names pydantic reserves (``json``, ``schema``, ``model_config``, ``_x``)
        self._field_names = tuple(
            (info.alias or attr, attr) for attr, info in args_model.model_fields.items()
        )
        self.context_param = context_param
        self.is_async = is_async
        self.is_method = is_method
        self.timeout = timeout
        self.exclusive = exclusive
        self.strict = strict
        self._check = check
        self._definition: ToolDefinition | None = None

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: dict[str, Any],
        entrypoint: Callable[[dict[str, Any], RunContext[Any]], Awaitable[Any]],
        *,
        description: str = "",
        timeout: float | None = None,
        exclusive: bool = False,
    ) -> Function:
        """A tool described by a JSON schema, such as another system's tool (an MCP server's):
        the model sees ``parameters`` as given, the arguments it sends are checked against it
        (what is wrong goes back to the model, the tool does not run), and
        ``await entrypoint(arguments, ctx)`` runs it with them and the run's ``RunContext``."""
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise UsageError(
                f"the parameters of tool {name!r} must be a JSON schema of an object, "
                f"not {str(parameters)[:200]}"
            )

        async def call(**values: Any) -> Any:
            ctx = values.pop(_SCHEMA_CONTEXT)
            return await entrypoint(values, ctx)

        return cls(
            name=name,
            description=description,
            parameters=parameters,
            entrypoint=call,
            args_model=_AnyArguments,
            context_param=_SCHEMA_CONTEXT,
            is_async=True,
            timeout=timeout,
            exclusive=exclusive,
            check=_schema_check(parameters),
        )

    @classmethod
    def from_callable(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        exclusive: bool = False,
        strict: bool = False,
    ) -> Function:
        """Build a ``Function`` from a ``def`` or ``async def`` (or any callable)."""
        if isinstance(fn, Function):
            return fn.with_options(
                name=name,
                description=description,
                timeout=timeout,
                exclusive=exclusive or None,
                strict=strict or None,
            )
        if not callable(fn):
            raise UsageError(f"a tool must be callable, got {type(fn).__name__}")
        target = fn.func if isinstance(fn, functools.partial) else fn
        if name == "":
            raise UsageError("a tool name cannot be empty")
        tool_name = name or getattr(target, "__name__", None) or type(fn).__name__
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
        hint_source = (
            target
            if inspect.isfunction(target) or inspect.ismethod(target)
            else (
                getattr(target, "__call__", target)  # noqa: B004
            )
        )
        hints = _type_hints(hint_source)
        doc_description, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
        params = list(signature.parameters.values())
        is_method = bool(params) and params[0].name in ("self", "cls") and inspect.isfunction(fn)
        if is_method:
            params = params[1:]
        fields, context_param = _argument_fields(params, hints, param_docs)
        args_model, schema = _arguments_model(tool_name, fields)
        schema.setdefault("properties", {})
        return cls(
            name=tool_name,
            description=description if description is not None else doc_description,
            parameters=schema,
            entrypoint=fn,
            args_model=args_model,
            context_param=context_param,
            is_async=_is_async_callable(fn),
            is_method=is_method,
            timeout=timeout,
            exclusive=exclusive,
            strict=strict,
        )

    def with_options(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        exclusive: bool | None = None,
        entrypoint: Callable[..., Any] | None = None,
        strict: bool | None = None,
    ) -> Function:
        """A copy with some options changed."""
        return Function(
            name=name or self.name,
            description=self.description if description is None else description,
            parameters=self.parameters,
            entrypoint=entrypoint or self.entrypoint,
            args_model=self._args_model,
            context_param=self.context_param,
            is_async=self.is_async,
            is_method=self.is_method and entrypoint is None,
            timeout=self.timeout if timeout is None else timeout,
            exclusive=self.exclusive if exclusive is None else exclusive,
            strict=self.strict if strict is None else strict,
            check=self._check,
        )

    @property
    def definition(self) -> ToolDefinition:
        """What the model is told about this tool."""
        if self._definition is None:
            self._definition = ToolDefinition(
                name=self.name,
                description=self.description,
                parameters=self.parameters,
                strict=self.strict,
            )
        return self._definition

    def validate_arguments(self, arguments: str) -> dict[str, Any]:
        """Parse and validate the model's JSON arguments into keyword arguments.

        Raises ``ArgumentsError`` with a message written for the model.
        """
        try:
            obj = self._args_model.model_validate_json(arguments.strip() or "{}")
        except ValidationError as exc:
            repaired = self._repaired(exc, arguments)
            if repaired is not None:
                return self.validate_arguments(repaired)
            message = self._describe_error(exc, arguments)
            raise ArgumentsError(message, tool=self.name, arguments=arguments) from None
        if self._check is not None:
            values = dict(obj.model_extra or {})
            problems = self._check(values)
            if problems:
                message = self._invalid(problems, arguments)
                raise ArgumentsError(message, tool=self.name, arguments=arguments)
            return values
        return {name: getattr(obj, attr) for name, attr in self._field_names}

    def _repaired(self, exc: ValidationError, arguments: str) -> str | None:
        """Arguments that are no JSON only because a string value holds unescaped double
        quotes (code with a docstring), with them escaped (``agentica.tools.repair``)."""
        if not any(err["type"] == "json_invalid" for err in exc.errors(include_url=False)):
            return None
        properties = self.parameters.get("properties") or {}
        strings = {
            k for k, v in properties.items() if isinstance(v, dict) and v.get("type") == "string"
        }
        return repair_quotes(arguments, strings, properties)

    def _describe_error(self, exc: ValidationError, arguments: str) -> str:
        lines = []
        for err in exc.errors(include_url=False):
            loc = ".".join(str(part) for part in err["loc"]) or "arguments"
            if err["type"] == "json_invalid" and _cut_off(err["msg"], arguments):
                lines.append(
                    f"- the arguments stop in the middle ({err['msg']}) after "
                    f"{len(arguments)} characters: the reply reached its length limit. Write "
                    "less in one call: split long text over several calls, or generate it with "
                    "code that reads the input"
                )
            elif err["type"] == "json_invalid":
                lines.append(
                    f"- the arguments are not valid JSON ({err['msg']}): {arguments[:200]!r}; "
                    "write one JSON object, with every string in double quotes and newlines "
                    'and quotes inside strings escaped (\\n, \\")'
                )
            elif err["type"] == "model_type" and not err["loc"]:
                lines.append(
                    f"- the arguments must be a JSON object with named arguments, not "
                    f"{arguments.strip()[:100]!r}"
                )
            elif err["type"] == "missing":
                lines.append(f"- {loc}: this required argument is missing")
            else:
                lines.append(f"- {loc}: {err['msg']} (got {err.get('input')!r:.100})")
        return self._invalid(lines, arguments)

    def _invalid(self, lines: list[str], arguments: str) -> str:
        """The message for the model: what is wrong (``lines``) and what is expected."""
        expected = ", ".join(
            f"{name}{'' if name in self.parameters.get('required', ()) else '?'}"
            for name in self.parameters.get("properties", {})
        )
        if _nests_a_call(arguments, self.parameters.get("properties", {})):
            lines.insert(
                0,
                "- you wrote a whole tool call as the arguments; the arguments are only the "
                f"object with {{{expected}}}",
            )
        return (
            f"Invalid arguments for tool '{self.name}':\n"
            + "\n".join(lines)
            + f"\nExpected arguments: {{{expected}}}. Call the tool again with corrected arguments."
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.is_method:
            raise UsageError(
                f"tool {self.name!r} is a method: call it on an instance of its Tool class"
            )
        return self.entrypoint(*args, **kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Function:
        if instance is None or not self.is_method:
            return self
        bound = self.entrypoint.__get__(instance, owner)
        return self.with_options(entrypoint=bound)

    def __repr__(self) -> str:
        kind = "async " if self.is_async else ""
        return f"<Function {kind}{self.name}({', '.join(self.parameters.get('properties', {}))})>"


@overload
def tool(fn: Callable[..., Any], /) -> Function: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    strict: bool = False,
) -> Callable[[Callable[..., Any]], Function]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    strict: bool = False,
) -> Function | Callable[[Callable[..., Any]], Function]:
    """Turn a function into a tool: ``@tool``, ``@tool(timeout=5)`` or ``tool(fn)``.

    Args:
        name: the tool's name (default: the function's name).
        description: what the tool does (default: the docstring).
        timeout: seconds one call may take.
        exclusive: run calls of this tool alone, never alongside other calls of the same turn.
        strict: ask the provider for strict schema adherence (OpenAI ``strict``).
    """

    def decorate(f: Callable[..., Any]) -> Function:
        return Function.from_callable(
            f,
            name=name,
            description=description,
            timeout=timeout,
            exclusive=exclusive,
            strict=strict,
        )

    return decorate(fn) if fn is not None else decorate
