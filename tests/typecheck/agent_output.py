"""Checked by mypy in ``tests/test_typing.py`` (never run): an agent's output type flows to
``RunResponse.output``, and ``clone()`` keeps the agent's class."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from agentica import Agent, RunResponse, RunStream
from agentica.deep import DeepAgent
from agentica.testing import ScriptedModel


class Invoice(BaseModel):
    number: str
    total: float


def takes_text(text: str) -> None: ...


async def typed_outputs() -> None:
    model = ScriptedModel([])
    text_agent = Agent(model=model)
    assert_type(text_agent, Agent[str])
    assert_type((await text_agent.run("hi")).output, str)

    invoices = Agent(model=model, output_type=Invoice)
    assert_type(invoices, Agent[Invoice])
    response = await invoices.run("Bill ACME")
    assert_type(response, RunResponse[Invoice])
    assert_type(response.output, Invoice)
    assert_type(response.output.total, float)
    assert_type(invoices.run_stream("Bill ACME"), RunStream[Invoice])
    assert_type((await invoices.resume({})).output, Invoice)
    assert_type(invoices.run_sync("Bill ACME").output, Invoice)
    takes_text(response.output)  # type: ignore[arg-type]  # not Any: an unused ignore fails

    numbers = Agent(model=model, output_type=list[int])
    assert_type((await numbers.run("count")).output, list[int])

    anything = Agent(model=model, output_type=int | None)  # not a class: the output is Any
    assert_type(anything, Agent[Any])


def clones_keep_their_class() -> None:
    invoices = Agent(model=ScriptedModel([]), output_type=Invoice)
    assert_type(invoices.clone(), Agent[Invoice])
    deep = DeepAgent(model=ScriptedModel([]))
    assert_type(deep, DeepAgent[str])
    assert_type(deep.clone(name="twin"), DeepAgent[str])
    reports = DeepAgent(model=ScriptedModel([]), output_type=Invoice)
    assert_type(reports, DeepAgent[Invoice])


def any_agent_fits_a_plain_annotation(agent: Agent) -> Agent:
    return Agent(model=ScriptedModel([]), output_type=Invoice)
