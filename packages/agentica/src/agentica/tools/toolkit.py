"""``Tool``: a named group of functions (a toolkit), and how an agent's tool list is resolved.

Subclass ``Tool`` and decorate methods with ``@tool`` to ship several related functions that share
state (a client, a directory); or build one from functions: ``Tool("math", [add, mul])``.
``resolve_functions`` flattens what an agent was given (functions, ``Function`` objects, ``Tool``
groups) into one name -> ``Function`` map and rejects duplicate names.

A group whose functions come from elsewhere (an MCP server's tools) overrides ``prepare`` (the
run awaits it when it starts: connect, list) and bumps ``revision`` whenever its functions
change; a group with a ``namespace`` gives way when one of its names is taken by another tool:
that function is offered as ``{namespace}_{name}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from agentica.errors import UsageError
from agentica.tools.function import Function

if TYPE_CHECKING:
    from agentica.tools.context import RunContext
    from agentica.tools.files import FileBackend

__all__ = ["Tool", "ToolLike", "resolve_functions"]


class Tool:
    """A container of related ``Function`` objects.

    Args:
        name: the group's name (default: the class name).
        functions: functions to include besides the ``@tool`` methods of a subclass.
        instructions: optional text added to the agent's instructions when the group is used.

    Attributes:
        revision: changes whenever ``functions`` changes after construction (an agent resolves
            its tools again when a group's revision moved).
        namespace: when set, a function of this group whose name another tool has already is
            offered as ``{namespace}_{name}`` instead of being refused as a duplicate.
    """

    revision: int = 0
    namespace: str | None = None

    def __init__(
        self,
        name: str | None = None,
        functions: Iterable[Callable[..., Any] | Function] = (),
        *,
        instructions: str | None = None,
    ) -> None:
        self.name = name or type(self).__name__
        self.instructions = instructions
        self.functions: dict[str, Function] = {}
        for klass in reversed(type(self).__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, Function):
                    self._add(getattr(self, attr))
        for fn in functions:
            self.register(fn)

    def register(self, fn: Callable[..., Any] | Function, **options: Any) -> Function:
        """Add a function to the group and return its ``Function``."""
        function = Function.from_callable(fn, **options)
        self._add(function)
        return function

    async def prepare(self) -> None:
        """Make ``functions`` ready; awaited when a run of an agent with this group starts
        (the groups of one agent concurrently). A group whose functions come from elsewhere
        connects and lists them here; what it raises fails the run. The default does nothing
        (and is not awaited)."""
        return

    def file_backend(self, ctx: RunContext[Any]) -> FileBackend | None:
        """The ``FileBackend`` this group's tools work on in run ``ctx``, if it works on files.

        A group of file tools returns its backend, so capabilities and other tools reach the same
        files through ``RunContext.files``; the default is ``None``.
        """
        return None

    def _add(self, function: Function) -> None:
        self.functions[function.name] = function

    def __repr__(self) -> str:
        return f"<Tool {self.name}: {', '.join(self.functions)}>"


ToolLike: TypeAlias = Callable[..., Any] | Function | Tool


def resolve_functions(tools: Iterable[ToolLike]) -> Mapping[str, Function]:
    """Flatten ``tools`` into a name -> ``Function`` map, rejecting duplicate names.

    The functions of groups with a ``namespace`` come last; one whose name is taken is renamed
    ``{namespace}_{name}`` (and refused only if that is taken too).
    """
    out: dict[str, Function] = {}

    def add(function: Function) -> None:
        known = out.get(function.name)
        if known is not None and known.entrypoint is not function.entrypoint:
            raise UsageError(
                f"two tools are named {function.name!r}; give one another name with "
                "@tool(name=...) or Function.from_callable(fn, name=...)"
            )
        out[function.name] = function

    spaced: list[Tool] = []
    for item in tools:
        if isinstance(item, Tool):
            if item.namespace:
                spaced.append(item)
                continue
            for function in item.functions.values():
                add(function)
        elif isinstance(item, Function):
            add(item)
        elif callable(item):
            add(Function.from_callable(item))
        else:
            raise UsageError(
                f"cannot use {item!r} as a tool: pass a function, a Function or a Tool"
            )
    for group in spaced:
        for function in group.functions.values():
            known = out.get(function.name)
            if known is not None and known.entrypoint is not function.entrypoint:
                spaced_name = f"{group.namespace}_{function.name}"[:64]
                function = function.with_options(name=spaced_name)
            add(function)
    return out
