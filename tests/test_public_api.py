"""The public surface is small and deliberate: changing it must change this test."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import agentica
import agentica.testing

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = {
    "Agent", "AgenticaError", "Claude", "FallbackModel", "LocalModel", "ConcurrentRunError",
    "ContextPolicy", "ModelRule", "Escalate", "ByTask",
    "Function", "FunctionCall",
    "GuardrailTripped", "HistoryPolicy", "LimitExceeded", "ModelError", "ModelPrice",
    "ModelSettings", "OpenAIChat", "OpenAILike", "OutputValidationError", "Retry", "RetryPolicy",
    "RunCancelled", "RunContext", "RunLimits", "RunResponse", "RunStream", "RunUsage", "StopRun",
    "Handoff", "Team",
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


# every public package and interface module: what it exports is pinned here (the top level and
# agentica.testing above); a new subpackage must be added to one of the two sets below
SUBPACKAGES: dict[str, set[str]] = {
    "agentica.acp": {
        "ACPServer", "EditorCommands", "EditorFiles", "GUARDED_TOOLS", "MODES", "SessionSetup",
        "serve_stdio"
    },
    "agentica.agent": {"Agent", "Instructions"},
    "agentica.context": {
        "Compaction", "ContextBudget", "ContextPolicy", "EstimateCounter", "GGUFCounter",
        "HistoryPolicy", "MessageSizes", "STEPS_HEADER", "SUMMARY_HEADER", "Summarizer",
        "TiktokenCounter", "TokenCounter", "assemble_history", "compact", "counter_for",
        "encoding_for_model", "estimate_tokens", "is_summary", "preview", "read_gguf_metadata",
        "repair_tool_pairs", "tool_pairs_ok", "transcript", "truncate_text"
    },
    "agentica.deep": {
        "AnswerCheck", "BackendError", "BraveProvider", "Checkpoints", "CodeNotRun",
        "CompositeBackend",
        "DeepAgent", "DeepResearch", "FileBackend", "FileInfo", "FileTools", "FilesystemBackend",
        "HARNESS_INSTRUCTIONS", "Heartbeat", "NumberCheck", "PythonKernel", "Reflection",
        "ResearchReport",
        "IgnoringBackend", "Project", "ProjectSettings", "load_project",
        "SearchProvider",
        "SearchResult",
        "SearxngProvider", "Shell", "Skill", "SkillError", "Skills", "StateBackend",
        "StoreBackend", "SubAgent", "SubAgents", "TavilyProvider", "TodoItem", "Todos",
        "UndoReport", "Web",
        "WorkspaceOverview", "load_skill", "provider_from_env", "session_state_backend"
    },
    "agentica.deep.backends": {
        "BackendError", "CompositeBackend", "FileBackend", "FileInfo", "FilesystemBackend",
        "GrepLine", "StateBackend", "StoreBackend", "normalize_path"
    },
    "agentica.deep.checks": {"AnswerCheck", "NumberCheck"},
    "agentica.deep.shell": {
        "BwrapCommands", "CodeNotRun", "LocalCommand", "LocalCommands", "Shell"
    },
    "agentica.errors": {
        "AgenticaError", "ArgumentsError", "ConcurrentRunError", "ContextOverflowError",
        "GuardrailTripped", "LimitExceeded", "MCPServerError", "ModelAuthError",
        "ModelConnectionError",
        "ModelError", "ModelHTTPError", "ModelResponseError", "ModelTimeoutError",
        "OutputValidationError", "RunCancelled", "SessionConflictError", "SessionFormatError",
        "StorageError", "ToolError", "UsageError"
    },
    "agentica.evals": {
        "AllChecks", "Attempt", "Check", "CheckResult", "CommandCheck", "Comparison", "EvalConfig",
        "EvalTask", "ExpectedAnswer", "NoReferenceCheck", "SWEBenchCheck", "Summary", "ablations",
        "answers_match", "compare", "load_config", "load_tasks", "markdown", "mcnemar", "run_eval",
        "speedups", "summarize", "task_set", "task_sets", "threshold_sweep", "wilson",
        "write_report"
    },
    "agentica.guardrails": {
        "GuardrailOutput", "InputGuardrail", "OutputGuardrail", "ToolCallInfo",
        "ToolInputGuardrail", "ToolOutputGuardrail", "input_guardrail", "output_guardrail",
        "tool_input_guardrail", "tool_output_guardrail"
    },
    "agentica.limits": {"RunBudget", "RunLimits"},
    "agentica.mcp": {
        "AGENT_TOOL", "MCPProgress", "MCPServer", "agent_server", "serve_http", "serve_stdio"
    },
    "agentica.knowledge": {
        "Chunk", "Document", "Embedder", "Hit", "IndexReport", "Knowledge", "KnowledgeStore",
        "KnowledgeTools", "LanceKnowledgeStore", "MiniLM", "OpenAIEmbeddings",
        "PostgresKnowledgeStore", "QdrantKnowledgeStore", "SQLiteKnowledgeStore", "SearchMode",
        "chunk_document", "load_document"
    },
    "agentica.memory": {
        "VariableSpace", "Workspace", "WorkspaceError", "WorkspaceMemory", "user_folder"
    },
    "agentica.messages": {
        "AssistantMessage", "ContentPart", "ImagePart", "Message", "ModelUsage", "ReasoningDelta",
        "RunUsage",
        "StreamDelta", "SystemMessage", "TextDelta", "TextPart", "ToolCall", "ToolCallDelta",
        "ToolDefinition", "ToolMessage", "Usage", "UserMessage"
    },
    "agentica.models": {
        "ByTask", "Claude", "Escalate", "FallbackModel", "KNOWN_PRICES", "LocalModel", "Model",
        "ModelPrice", "ModelRule", "TurnFacts",
        "ModelRequest", "ModelResponse", "ModelSettings", "ModelStreamEvent", "OpenAIChat",
        "OpenAILike", "OutputSchema", "PRESETS", "ResponseDone", "RetryPolicy", "StreamAssembler",
        "ToolChoice", "collect_stream", "cost_of", "model_from_string", "new_tool_call_id",
        "price_for", "resolve_model"
    },
    "agentica.run": {
        "AgentMemory", "AnswerSentBack", "ContextCompacted", "ContextWindow", "Decision",
        "Handoff", "HandoffOccurred", "drop_tool_calls", "keep_history", "last_turns",
        "HumanApproval", "ModelRequestStarted", "ModelResponseReceived", "PendingCall",
        "ReasoningDelta", "RepetitionGuard", "RunCompleted", "RunEvent", "RunInput", "RunLimits",
        "RunRecord", "RunResponse", "RunStarted", "RunStream", "TextDelta", "ToolCallCompleted",
        "ToolCallDelta", "ToolCallStarted", "ToolProgress", "model_summarizer",
        "output_schema_for", "run_events"
    },
    "agentica.storage": {
        "Branch", "SessionTree", "HandoffRecord",
        "InMemoryStorage", "JSONFileStorage", "MAX_VARIABLE_BYTES", "RUN_FORMAT_VERSION",
        "RunRecord", "SQLStorage", "SQLiteStorage", "SessionData", "SessionInfo",
        "SessionNotFound", "SpanRecord", "Storage", "ToolCallRecord", "Variable", "VariableInfo",
        "decode_run",
        "default_sqlite_path", "dump_run", "encode_run", "load_run", "open_storage"
    },
    "agentica.teams": {"Team", "TeamMode"},
    "agentica.testing": {
        "BadBody", "FakeAnthropicServer", "FakeOpenAIServer", "FunctionModel", "HTTPFault", "Hang",
        "Reply", "ScriptedModel", "StreamReply", "ToolCallingModel", "TruncatedStream", "call",
        "chunks", "example_value", "model_error", "text", "tool_calls"
    },
    "agentica.testing.conformance": {
        "COMMAND_BACKEND_CHECKS", "CommandBackendCase", "CommandBackendCheck",
        "CommandBackendFactory", "FILE_BACKEND_CHECKS", "FileBackendCase", "FileBackendCheck",
        "FileBackendFactory", "NotApplicable", "OUTSIDE_TEXT", "SECRET_VARIABLE", "Symlinks",
        "check_command_backend", "check_file_backend"
    },
    "agentica.tools": {
        "ArgumentsError", "Function", "FunctionCall", "Retry", "RunContext", "StopRun", "Tool",
        "ToolLike", "ToolSettings", "execute_calls", "render_result", "resolve_functions", "tool",
        "tool_thread_pool"
    },
    "agentica.tools.commands": {
        "CappedOutput", "CommandBackend", "CommandHandle", "CommandResult", "CommandStatus"
    },
    "agentica.tools.files": {"BackendError", "FileBackend", "FileInfo", "GrepLine"},
    "agentica.tracing": {"OpenTelemetry", "export_trace", "otlp_provider", "span_name"},
    "agentica.workflows": {
        "END", "Approval", "InMemoryWorkflowStore", "PendingApproval", "Runnable",
        "SQLWorkflowStore", "StepCompleted", "StepContext", "StepFailed", "StepRecord",
        "StepStarted", "StoredRun", "Workflow", "WorkflowCompleted", "WorkflowConflictError",
        "WorkflowEvent", "WorkflowFailed", "WorkflowGraphError", "WorkflowPaused",
        "WorkflowResult", "WorkflowStarted", "WorkflowStore"
    },
}  # fmt: skip

INTERNAL = {"agentica.cli", "agentica.storage.migrations", "agentica.storage.migrations.versions"}


def test_every_subpackage_exports_exactly_its_pinned_names() -> None:
    for name, expected in SUBPACKAGES.items():
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no module docstring"
        assert set(module.__all__) == expected, f"{name}.__all__ changed"
        for export in module.__all__:
            assert hasattr(module, export), f"{name}.__all__ names missing {export}"


def test_every_subpackage_is_pinned_or_internal() -> None:
    packages = {
        info.name
        for info in pkgutil.walk_packages(agentica.__path__, "agentica.")
        if info.ispkg and not info.name.startswith("agentica.testing.")
    }
    packages |= {"agentica.testing.conformance"}
    unlisted = packages - SUBPACKAGES.keys() - INTERNAL
    assert not unlisted, f"pin the exports of {sorted(unlisted)} in SUBPACKAGES (or INTERNAL)"


def _docstring_prose(path: Path) -> list[str]:
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
    return re.sub(r"```.*?```", "", docstring, flags=re.S).strip().splitlines()


def test_module_docstrings_say_in_a_few_lines_what_the_module_owns() -> None:
    root = Path(agentica.__file__).parent
    long = {
        str(path.relative_to(root)): len(lines)
        for path in sorted(root.rglob("*.py"))
        if len(lines := _docstring_prose(path)) > 12
    }
    assert not long, f"module docstrings over 12 lines (examples aside): {long}"


def test_no_complexity_exemptions() -> None:
    sources = [
        p
        for top in ("packages", "tests", "benchmarks", "examples")
        for p in (ROOT / top).rglob("*.py")
        if ".venv" not in p.parts
    ]
    marker = "noqa: " + "C901"  # spelt in two parts so this file does not match itself
    exempt = [str(p) for p in sources if marker in p.read_text()]
    assert not exempt, f"restructure instead of exempting from the complexity gate: {exempt}"


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
    assert issubclass(errors.ArgumentsError, errors.ToolError)
    import agentica.tools
    import agentica.tools.function

    assert agentica.tools.ArgumentsError is agentica.tools.function.ArgumentsError
    assert agentica.tools.ArgumentsError is errors.ArgumentsError
