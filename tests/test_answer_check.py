"""AnswerCheck: the model is sent back once to verify its work before the run ends."""

from __future__ import annotations

from agentica import Agent, tool
from agentica.deep import AnswerCheck
from agentica.messages import UserMessage
from agentica.testing import ScriptedModel, call, tool_calls


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


async def test_a_premature_answer_is_checked_once_and_the_model_continues() -> None:
    model = ScriptedModel([
        tool_calls(call("write_file", path="a.txt", content="x")),
        "Done.",  # answers too early
        tool_calls(call("write_file", path="b.txt", content="y")),  # the check made it continue
        "Both files written.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[write_file], capabilities=[AnswerCheck()])
    response = await agent.run("Write a.txt and b.txt")
    assert response.content == "Both files written."
    check = model.requests[2].messages[-1]
    assert isinstance(check, UserMessage) and "Write a.txt and b.txt" in check.text
    assert [c.call.arguments for c in response.tool_calls][
        -1
    ] == '{"path": "b.txt", "content": "y"}'
    assert model.remaining == 0  # checked once only: the last answer ended the run


async def test_no_check_for_plain_questions_or_when_disabled() -> None:
    model = ScriptedModel(["Paris."])
    response = await Agent(model=model, capabilities=[AnswerCheck()]).run("Capital of France?")
    assert response.content == "Paris." and len(model.requests) == 1
    model = ScriptedModel([tool_calls(call("write_file", path="a", content="b")), "ok"])
    agent = Agent(model=model, tools=[write_file], capabilities=[AnswerCheck(max_checks=0)])
    assert (await agent.run("go")).content == "ok" and len(model.requests) == 2
