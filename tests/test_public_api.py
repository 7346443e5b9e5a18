"""The public surface is small and deliberate: changing it must change this test."""

from __future__ import annotations

import importlib

import agentica
import agentica.testing

PUBLIC = {
    "Agent", "AgenticaError", "Claude", "FallbackModel", "LocalModel", "ConcurrentRunError",
    "ContextPolicy",
    "Function", "FunctionCall",
    "GuardrailTripped", "HistoryPolicy", "LimitExceeded", "ModelError", "ModelPrice",
    "ModelSettings", "OpenAIChat", "OpenAILike", "OutputValidationError", "Retry", "RetryPolicy",
    "RunCancelled", "RunContext", "RunLimits", "RunResponse", "RunStream", "RunUsage", "StopRun",
    "Tool", "ToolError", "ToolSettings", "Usage", "UsageError", "__version__", "tool",
}  # fmt: skip

TESTING = {
    "BadBody", "FakeAnthropicServer", "FakeOpenAIServer", "FunctionModel", "HTTPFault", "Hang",
    "Reply",
    "ScriptedModel", "StreamReply", "ToolCallingModel", "TruncatedStream", "call", "chunks",
    "example_value", "model_error", "text", "tool_calls",
}  # fmt: skip


def test_top_level_exports_are_exactly_the_public_surface() -> None:
    assert set(agentica.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(agentica, name) is not None


def test_testing_exports() -> None:
    assert set(agentica.testing.__all__) == TESTING


def test_every_submodule_declares_its_exports_and_they_exist() -> None:
    for name in (
        "agentica.messages", "agentica.errors", "agentica.models", "agentica.tools",
        "agentica.run", "agentica.context", "agentica.agent", "agentica.guardrails",
        "agentica.deep",
    ):  # fmt: skip
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no module docstring"
        for export in module.__all__:
            assert hasattr(module, export), f"{name}.__all__ names missing {export}"


GUARDRAILS = {
    "GuardrailOutput", "InputGuardrail", "OutputGuardrail", "ToolCallInfo", "ToolInputGuardrail",
    "ToolOutputGuardrail", "input_guardrail", "output_guardrail", "tool_input_guardrail",
    "tool_output_guardrail",
}  # fmt: skip


def test_guardrail_exports() -> None:
    import agentica.guardrails

    assert set(agentica.guardrails.__all__) == GUARDRAILS


def test_error_tree() -> None:
    from agentica import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.AgenticaError)
    assert issubclass(errors.ConcurrentRunError, errors.UsageError)
    assert issubclass(errors.ContextOverflowError, errors.ModelHTTPError)
    assert issubclass(errors.ModelHTTPError, errors.ModelError)
