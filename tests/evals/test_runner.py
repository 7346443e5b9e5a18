"""``run_eval``, the report and ``agentica eval``: scripted models (in process, and an
OpenAI-compatible server on 127.0.0.1 for the command line), real workspaces and checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (imported here: the server's first start must not import it)
import pytest

from agentica.evals import (
    Attempt,
    CommandCheck,
    EvalConfig,
    EvalTask,
    ExpectedAnswer,
    ablations,
    compare,
    load_config,
    markdown,
    mcnemar,
    run_eval,
    speedups,
    summarize,
    threshold_sweep,
    wilson,
)
from agentica.messages import AssistantMessage, Message, ToolMessage, UserMessage
from agentica.models.base import Model, ModelRequest
from agentica.testing import FakeOpenAIServer, FunctionModel, call, text, tool_calls
from tests.test_cli import agentica_cli

NOTE_TASK = EvalTask(
    id="write-note", prompt="Write hello into note.txt.",
    files={"seed.txt": "x\n"}, check=CommandCheck("grep -qx hello note.txt"),
)  # fmt: skip
ANSWER_TASK = EvalTask(
    id="capital", prompt="What is the capital of Norway?", check=ExpectedAnswer("Oslo")
)


def _last_user(messages: list[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, UserMessage)), "")


def _writer(messages: list[Message], request: ModelRequest) -> AssistantMessage:
    """A model that does each task: writes the note, answers the question (wrongly when the
    system prompt is the standard one: the ablation changes the outcome)."""
    if any(isinstance(m, ToolMessage) for m in messages):
        return text("Done: the note says hello.")
    task = _last_user(messages)
    if "note.txt" in task:
        return tool_calls(call("write_file", path="note.txt", content="hello\n"))
    system = messages[0].content if messages else ""
    return text("Bergen" if "helpful assistant" in str(system) else "Oslo")


def _factory(models: list[Model]) -> Any:
    def build(config: EvalConfig) -> Model:
        model = FunctionModel(_writer)
        models.append(model)
        return model

    return build


async def test_run_eval_scores_every_task_config_and_seed_and_caches(tmp_path: Path) -> None:
    configs = [EvalConfig(name="deep"), EvalConfig(name="plain", deep_prompt=False)]
    models: list[Model] = []
    seen: list[Attempt] = []
    attempts = await run_eval(
        [NOTE_TASK, ANSWER_TASK], configs, repeats=2, seed=7, cache_dir=tmp_path / "cache",
        model_factory=_factory(models), on_attempt=seen.append,
    )  # fmt: skip
    assert len(attempts) == len(seen) == 8
    assert [(a.config, a.task, a.seed) for a in attempts[:4]] == [
        ("deep", "write-note", 7), ("deep", "write-note", 8),
        ("deep", "capital", 7), ("deep", "capital", 8),
    ]  # fmt: skip
    by = {(a.config, a.task): a.passed for a in attempts}
    assert by == {
        ("deep", "write-note"): True, ("deep", "capital"): True,
        ("plain", "write-note"): True, ("plain", "capital"): False,
    }  # fmt: skip
    note = attempts[0]
    assert note.tool_calls == 1 and note.model_calls >= 2 and note.error is None
    assert note.trace is not None and note.input_tokens > 0 and note.wall_time > 0
    failed = next(a for a in attempts if not a.passed)
    assert "Bergen" in failed.answer and "Oslo" in failed.detail
    assert len(models) == 1  # both configurations name the same model: one object
    # again: everything comes from the cache, no model is built
    again_models: list[Model] = []
    again = await run_eval(
        [NOTE_TASK, ANSWER_TASK], configs, repeats=2, seed=7, cache_dir=tmp_path / "cache",
        model_factory=_factory(again_models),
    )  # fmt: skip
    assert all(a.cached for a in again) and not again_models
    assert [(a.task, a.passed) for a in again] == [(a.task, a.passed) for a in attempts]
    # a changed task is run again (its content is part of the key)
    changed = EvalTask(id="capital", prompt="Capital of Norway?", check=ExpectedAnswer("Oslo"))
    rerun = await run_eval([changed], configs[:1], cache_dir=tmp_path / "cache",
                           model_factory=_factory(again_models))  # fmt: skip
    assert not rerun[0].cached and rerun[0].passed


async def test_a_crashing_attempt_is_a_failure_and_the_others_finish(tmp_path: Path) -> None:
    def broken_check(workspace: Path, answer: str) -> Any:
        raise RuntimeError("the checker fell over")

    bad = EvalTask(id="bad", prompt="What is the capital of Norway?", check=broken_check)
    attempts = await run_eval(
        [bad, ANSWER_TASK], [EvalConfig(name="deep")], concurrency=2,
        model_factory=_factory([]),
    )  # fmt: skip
    assert [a.passed for a in attempts] == [False, True]
    assert attempts[0].error == "RuntimeError: the checker fell over"


async def test_concurrent_tools_speed_up_and_the_ablation_runs_them_one_at_a_time() -> None:
    async def slow(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in messages):
            return text("done")
        return tool_calls(*(call("execute", command="sleep 0.3") for _ in range(3)))

    task = EvalTask(id="sleepy", prompt="Wait three times.", check=CommandCheck("true"))
    attempts = await run_eval(
        [task], [EvalConfig(name="full"), EvalConfig(name="-TaskGroup", concurrent_tools=False)],
        model_factory=lambda config: FunctionModel(slow),
    )  # fmt: skip
    concurrent = speedups([attempts[0]])
    sequential = speedups([attempts[1]])
    assert list(concurrent) == list(sequential) == [3]
    assert concurrent[3][0] > 2.0 > 1.2 > sequential[3][0]


def test_wilson_and_mcnemar_match_known_values() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson(0, 0) == (0.0, 1.0)
    assert mcnemar(0, 5) == pytest.approx(0.0625)
    assert mcnemar(3, 3) == 1.0
    assert mcnemar(1, 9) == pytest.approx(0.021484375)


def _attempt(config: str, task: str, seed: int, passed: bool) -> Attempt:
    return Attempt(task=task, config=config, fingerprint="f", seed=seed, repeat=0, passed=passed)


def test_summary_compare_and_markdown() -> None:
    attempts = [
        *(_attempt("a", f"t{i}", 0, True) for i in range(6)),
        *(_attempt("b", f"t{i}", 0, i < 1) for i in range(6)),
    ]
    rows = summarize(attempts)
    assert [(r.config, r.solved, r.attempts) for r in rows] == [("a", 6, 6), ("b", 1, 6)]
    c = compare(attempts, "a", "b")
    assert (c.pairs, c.both, c.only_a, c.only_b) == (6, 1, 5, 0)
    assert c.p_value == pytest.approx(0.0625)
    report = markdown(attempts, title="T")
    assert "| a | 6/6 | 100% |" in report and "| b | 1/6 | 17% |" in report
    assert "| b | 6 | 1 | 0 | 5 | 0.062 |" in report  # b paired against the baseline a
    assert "| t0 | 1/1 | 1/1 |" in report and "| t5 | 1/1 | 0/1 |" in report


def test_ablations_and_sweep_follow_the_papers_matrix(tmp_path: Path) -> None:
    base = EvalConfig(name="deep")
    names = [c.name for c in ablations(base)]
    assert names == [
        "deep", "deep -TaskGroup", "deep -DualThreshold", "deep SingleThreshold",
        "deep -HEARTBEAT", "deep -DeepPrompt", "deep -Repetition", "deep -AgentAsSession",
        "deep base",
    ]  # fmt: skip
    matrix = {c.name: c for c in ablations(base)}
    assert not matrix["deep -TaskGroup"].concurrent_tools
    assert matrix["deep -DualThreshold"].context == "off"
    assert matrix["deep SingleThreshold"].context == "single"
    assert matrix["deep base"].kind == "base"
    assert len({c.fingerprint() for c in matrix.values()}) == len(matrix)
    assert [c.name for c in ablations(base, ["HEARTBEAT", "-DeepPrompt"])] == [
        "deep", "deep -HEARTBEAT", "deep -DeepPrompt",
    ]  # fmt: skip
    sweep = threshold_sweep(base)
    assert len(sweep) == 11 and all(c.soft < c.hard for c in sweep)
    path = tmp_path / "small.toml"
    path.write_text('kind = "base"\ntemperature = 0.3\nheartbeat = false\n')
    loaded = load_config(path)
    assert (loaded.name, loaded.kind, loaded.temperature) == ("small", "base", 0.3)
    path.write_text("temprature = 0.3\n")
    with pytest.raises(Exception, match=r"unknown setting.*temprature"):
        load_config(path)


def _responder(body: dict[str, Any]) -> Any:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return "I wrote the note."
    task = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if isinstance(task, str) and "note.txt" in task:
        return AssistantMessage(tool_calls=[call("write_file", path="note.txt", content="hello\n")])
    return "Oslo"


async def test_agentica_eval_runs_a_jsonl_set_against_a_server_and_writes_the_report(
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {"id": "note", "prompt": "Write hello into note.txt.", "check": "grep -qx hello note.txt"},
        {"id": "capital", "prompt": "What is the capital of Norway?", "answer": "Oslo"},
        {"id": "river", "prompt": "Which river flows through Paris?", "answer": "Seine"},
    ]
    tasks.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    async with FakeOpenAIServer(_responder) as server:
        config = tmp_path / "served.toml"
        config.write_text(f'model = "fake"\nbase_url = "{server.base_url}"\n')
        other = tmp_path / "served-base.toml"
        other.write_text(f'kind = "base"\nmodel = "fake"\nbase_url = "{server.base_url}"\n')
        out = tmp_path / "report"
        code, stdout, stderr = await agentica_cli(
            "eval", str(tasks), "--agent", str(config), "--compare", str(other),
            "--repeats", "2", "--out", str(out), "--cache", str(tmp_path / "cache"),
            env={"AGENTICA_API_KEY": "test-key"},
        )  # fmt: skip
    assert code == 0, stderr
    assert "| served | 4/6 | 67% |" in stdout
    assert "| served-base | 4/6 | 67% |" in stdout
    assert "| river | 0/2 | 0/2 |" in stdout
    assert "12 attempts" in stderr
    data = json.loads((out / "results.json").read_text())
    assert len(data["attempts"]) == 12 and data["summary"][0]["solved"] == 4
    assert (out / "report.md").read_text().startswith("# agentica eval tasks")
    for name in ("success.png", "context.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # an attempt's timeline, from the results
    code, stdout, stderr = await agentica_cli(
        "trace", str(out / "results.json"), "--attempt", "note"
    )
    assert code == 0, stderr
    assert "· served · completed" in stdout and "execute_tool write_file" in stdout
    code, stdout, stderr = await agentica_cli("trace", str(out / "results.json"), "--attempt", "2")
    assert code == 0, stderr
    assert "execute_tool" not in stdout  # the question: answered without a tool
