"""The error tree: every exception agentica raises on purpose.

```
AgenticaError
├── UsageError                 the developer used the API wrongly (fix the code)
│   └── ConcurrentRunError     a second run started on an agent that is already running
├── ModelError                 a model provider failed; ``retryable`` says if trying again may help
│   ├── ModelHTTPError         the provider answered with an HTTP error status
│   │   ├── ModelAuthError         401/403: the key is missing or wrong
│   │   └── ContextOverflowError   the request does not fit the model's context window
│   ├── ModelConnectionError   the provider could not be reached
│   ├── ModelTimeoutError      the provider did not answer in time
│   └── ModelResponseError     the provider answered something that is not a valid reply
├── ToolError                  raised by a tool to report a failure; the message goes to the model
│   └── ArgumentsError         the model's arguments for a tool did not validate; it did not run
├── GuardrailTripped           a guardrail stopped the run
├── LimitExceeded              a run limit (turns, tokens, tool calls, time, ...) was reached
├── OutputValidationError      the model's final answer never matched the requested output type
├── RunCancelled               the run was cancelled through its handle
├── MCPServerError             an MCP server did not start, answer or list its tools
└── StorageError               a storage backend failed (database unreachable, disk full, ...)
    ├── SessionFormatError     a stored session is damaged or from an unsupported version
    └── SessionConflictError   another agent or process saved the session since it was loaded
```

Control signals (stop the run, retry with a message to the model) are values a tool returns
(``agentica.tools.StopRun``, ``agentica.tools.Retry``), not exceptions. A plain
``asyncio.CancelledError`` from cancelling the task that runs an agent propagates unchanged.
"""

from __future__ import annotations

__all__ = [
    "AgenticaError",
    "ArgumentsError",
    "ConcurrentRunError",
    "ContextOverflowError",
    "GuardrailTripped",
    "LimitExceeded",
    "MCPServerError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "OutputValidationError",
    "RunCancelled",
    "SessionConflictError",
    "SessionFormatError",
    "StorageError",
    "ToolError",
    "UsageError",
]


class AgenticaError(Exception):
    """Base class of every error agentica raises on purpose."""


class UsageError(AgenticaError):
    """The framework was used in a way it does not support; the message says how to fix the code."""


class ConcurrentRunError(UsageError):
    """A run was started on an agent that already has one in progress.

    An agent object is one conversation. Use ``agent.clone()`` for an independent session that
    shares the configuration, or await the running run first.
    """


class ModelError(AgenticaError):
    """A model provider call failed.

    Attributes:
        provider: the provider name (``"openai"``, ``"anthropic"``, ...).
        model: the model id the request was for.
        retryable: whether repeating the same request may succeed (rate limits, 5xx, timeouts).
    """

    def __init__(
        self, message: str, *, provider: str = "", model: str = "", retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.retryable = retryable


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status.

    Attributes:
        status: the HTTP status code.
        body: the start of the response body (at most 2,000 characters).
        retry_after: seconds the provider asked to wait (from ``Retry-After``), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: str = "",
        provider: str = "",
        model: str = "",
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, model=model, retryable=retryable)
        self.status = status
        self.body = body
        self.retry_after = retry_after


class ModelAuthError(ModelHTTPError):
    """The provider rejected the credentials (HTTP 401 or 403)."""


class ContextOverflowError(ModelHTTPError):
    """The request was longer than the model's context window."""


class ModelConnectionError(ModelError):
    """The provider could not be reached (refused, reset, DNS failure)."""


class ModelTimeoutError(ModelError):
    """The provider did not answer within the configured timeout."""


class ModelResponseError(ModelError):
    """The provider's reply could not be understood (bad JSON, truncated stream, wrong shape)."""


class ToolError(AgenticaError):
    """Raised by a tool to report a failure; its message is sent to the model as the result.

    Any other exception a tool raises is reported to the model too (with its type name); raise
    ``ToolError`` when the message is written for the model and should be shown as is.
    """


class ArgumentsError(ToolError):
    """The arguments the model sent for a tool did not validate (``Function.validate_arguments``).

    The tool does not run: the message, written for the model, is the call's result (what was
    wrong, the arguments the tool expects), and the model may call again. Bad input from the
    model, not a mistake in the code (that is ``UsageError``).

    Attributes:
        tool: the name of the tool.
        arguments: the arguments as the model sent them (JSON text).
    """

    def __init__(self, message: str, *, tool: str = "", arguments: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.arguments = arguments


class GuardrailTripped(AgenticaError):
    """A guardrail stopped the run.

    Attributes:
        guardrail: the name of the guardrail that tripped.
        info: what the guardrail reported.
    """

    def __init__(self, message: str, *, guardrail: str, info: object = None) -> None:
        super().__init__(message)
        self.guardrail = guardrail
        self.info = info


class LimitExceeded(AgenticaError):
    """A run limit was reached.

    Attributes:
        limit: the name of the limit (``"max_turns"``, ``"max_tool_calls"``, ``"max_tokens"``,
            ``"max_wall_time"``, ...), as spelled in ``agentica.RunLimits``.
        value: the configured value of the limit.
    """

    def __init__(self, limit: str, value: float, detail: str = "") -> None:
        message = (
            f"run limit {limit}={value:g} reached{': ' + detail if detail else ''}. "
            f"Raise it with Agent(..., limits=RunLimits({limit}=...)) or "
            f"agent.run(..., limits=RunLimits({limit}=...))."
        )
        super().__init__(message)
        self.limit = limit
        self.value = value


class OutputValidationError(AgenticaError):
    """The model's final answer did not match the requested output type after all retries."""


class RunCancelled(AgenticaError):
    """The run was cancelled through its handle (``RunStream.cancel()``)."""


class StorageError(AgenticaError):
    """A storage backend failed; the message names the backend and what to check."""


class SessionFormatError(StorageError):
    """A stored session or run is damaged (truncated, edited) or from an unsupported version."""


class SessionConflictError(StorageError):
    """Another agent or process saved the session since this one loaded it; nothing was written.

    A save states the session revision it was based on, and the storage refuses it if the stored
    revision moved on. An agent merges what it can (runs appended by the other writer, state
    keys only one side changed) and raises this error only when both changed the same value.

    Attributes:
        user_id, session_id: the session.
        expected: the revision the save was based on.
        found: the stored revision (``None``: the session was deleted).
        run: the ``RunRecord`` that was not saved (its output, messages and tool calls), when the
            conflict came from an agent saving a run; ``None`` for a storage call.
    """

    def __init__(
        self,
        message: str,
        *,
        user_id: str = "",
        session_id: str = "",
        expected: int = 0,
        found: int | None = None,
        run: object = None,
    ) -> None:
        super().__init__(message)
        self.user_id = user_id
        self.session_id = session_id
        self.expected = expected
        self.found = found
        self.run = run


class MCPServerError(AgenticaError):
    """An MCP server did not start, did not answer in time, or could not list its tools (the
    run that needed it fails with this error); ``server`` names it.

    A tool of the server that reports an error is not this: its message goes to the model as
    the call's result (a ``ToolError``)."""

    def __init__(self, message: str, *, server: str = "") -> None:
        super().__init__(message)
        self.server = server
