"""Per-turn slots go last, so the prompt before them is the same from one call to the next.

A slot that changes every turn (the todo list, a checkpoint) used to sit right after the
instructions: every change re-sent a different prompt from the start, and llama.cpp (or a
provider's prompt cache) had to process the whole conversation again. Measured on the embedded
model with a 2,160-token conversation: 38 s per request with the slot in front, 0.5 s with it at
the end (2,157 tokens from the KV cache)."""

from __future__ import annotations

import itertools

from agentica import Agent, tool
from agentica.deep import Todos
from agentica.messages import AssistantMessage, SystemMessage, UserMessage
from agentica.models.chat_template import render_chatml
from agentica.testing import ScriptedModel, call, tool_calls


def test_a_late_system_message_stays_where_it_is_in_the_chatml_prompt() -> None:
    convo = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Plan it."),
        AssistantMessage(content="Planned."),
    ]
    one = render_chatml([*convo, SystemMessage(content="Todos: [ ] a")])
    two = render_chatml([*convo, SystemMessage(content="Todos: [x] a")])
    head = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nPlan it.<|im_end|>\n"
    assert one.startswith(head) and two.startswith(head)
    assert one.endswith("<|im_start|>system\nTodos: [ ] a<|im_end|>\n<|im_start|>assistant\n")
    common = len(one) - len("[ ] a<|im_end|>\n<|im_start|>assistant\n")
    assert one[:common] == two[:common]  # only the slot differs
    # leading system messages still make one system turn
    merged = render_chatml([SystemMessage(content="A."), SystemMessage(content="B."), *convo[1:]])
    assert merged.startswith("<|im_start|>system\nA.\n\nB.<|im_end|>\n<|im_start|>user\n")


async def test_a_changing_todo_list_leaves_the_start_of_every_request_as_it_was() -> None:
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=["read", "write"])),
        tool_calls(call("work")),
        tool_calls(call("write_todos", todos=[{"content": "read", "status": "completed"},
                                              "write"])),
        tool_calls(call("work")),
        tool_calls(call("write_todos", todos=[{"content": "read", "status": "done"},
                                              {"content": "write", "status": "done"}])),
        "Done.",
    ])  # fmt: skip

    @tool
    def work() -> str:
        """Do the next step."""
        return "done"

    agent = Agent(model=model, instructions="Be brief.", tools=[work], capabilities=[Todos()])
    await agent.run("Do it")
    prompts = [render_chatml(r.messages) for r in model.requests]
    for before, after in itertools.pairwise(prompts[1:]):
        # everything up to the previous request's slot is unchanged: only new turns and the
        # new slot follow
        kept = before[: before.rindex("<|im_start|>system\nTodos:")]
        assert after.startswith(kept)
    assert [r.messages[-1].content for r in model.requests[1:]] == [
        "Todos: [ ] read  [ ] write",
        "Todos: [ ] read  [ ] write",
        "Todos: [x] read  [ ] write",
        "Todos: [x] read  [ ] write",
        "Todos: [x] read  [x] write",
    ]


async def test_a_turn_offering_fewer_tools_leaves_the_prompt_s_start_as_it_was() -> None:
    """A capability that takes tools away for a turn (a repetition stop, the todo tools after
    a list saved twice) used to change the tool list in the system turn, so the embedded model
    processed the whole conversation again (seen: 105 s for one call of a 3,900-token
    conversation, 10 s before and after). Every tool stays listed; the callable ones are named
    last, and a call of another is refused as before."""
    from agentica.models.local import LocalModel
    from agentica.run.capability import Capability

    class EveryOther(Capability):
        name = "every-other"

        async def allowed_tools(self, ctx: object) -> list[str] | None:
            self.turns = getattr(self, "turns", 0) + 1
            return ["work"] if self.turns % 2 == 0 else None

    @tool
    def work() -> str:
        """Do the next step."""
        return "done"

    @tool
    def rest() -> str:
        """Take a break."""
        return "rested"

    model = ScriptedModel([
        tool_calls(call("rest")), tool_calls(call("rest")), tool_calls(call("work")), "Done.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[work, rest], capabilities=[EveryOther()])
    await agent.run("Do it")
    statuses = [c.status for r in agent.memory.runs for c in r.tool_calls]
    assert statuses == ["success", "error", "success"]
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["work", "rest"], ["work"], ["work", "rest"], ["work"],
    ]  # fmt: skip
    local = LocalModel("qwen2.5-coder-0.5b-instruct")
    prompts = [local.build_body(r, stream=False)["prompt"] for r in model.requests]
    note = "<|im_start|>system\nFor this reply you can call only these tools: work.<|im_end|>\n"
    for before, after in itertools.pairwise(prompts):
        kept = before.removesuffix("<|im_start|>assistant\n").removesuffix(note)
        assert after.startswith(kept)
    assert prompts[1].endswith(note + "<|im_start|>assistant\n") and '"rest"' in prompts[1]
    assert note not in prompts[2]
