"""The service's default: a course with no model configured answers through the gateway with
the embedded local model, counted on the student's budget (one real model run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from agentica.models.local import DEFAULT_LOCAL_MODEL
from agentica.models.weights import EMBEDDED_MODELS, weights_status
from agentica_team.principal import Principal
from tests.team.server import serve_team, sqlite_settings

pytestmark = [
    pytest.mark.slow,
    # once in a full run the loop stalled 9.9 s in uvicorn's Server.serve around the embedded
    # model's first answer (not seen when run alone). The likely cause, llama.cpp's compute
    # threads on every core starving the loop's thread, is why the service now leaves a core
    # free (CourseModels._local); kept until a full run shows no stall
    pytest.mark.allow_blocking,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        weights_status(EMBEDDED_MODELS[DEFAULT_LOCAL_MODEL]) == "missing",
        reason="the embedded model (the `local` extra) is not installed",
    ),
]


async def test_a_course_without_a_model_uses_the_embedded_one(tmp_path: Path) -> None:
    async with serve_team(sqlite_settings(tmp_path)) as (url, team):
        assert team.settings.model == "local"
        teacher = await team.accounts.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "system")
        course = await team.accounts.create_course(owner, "web")
        await team.budgets.set_budget(course.id, scope="student", period="day", max_tokens=5000)
        [ann] = await team.accounts.add_students(course, [("ann@school.edu", "Ann")], actor="")
        assert ann.token is not None
        student = await asyncio.to_thread(
            AsyncOpenAI, base_url=f"{url}/v1", api_key=ann.token, max_retries=0
        )
        try:
            models = await student.models.list()
            assert [m.id for m in models.data] == ["web"]
            reply = await student.chat.completions.create(
                model="web",
                messages=[{"role": "user", "content": "Say hello in one word."}],
                max_tokens=8,
                temperature=0.0,
            )
        finally:
            await student.close()
        assert reply.choices[0].message.content
        assert reply.usage is not None and 0 < reply.usage.completion_tokens <= 8
        for _ in range(100):  # the gateway settles right after answering
            found = await team.budgets.usage(course.id)
            if found:
                break
            await asyncio.sleep(0.05)
        [usage] = found
        assert usage.requests == 1
        assert usage.output_tokens == reply.usage.completion_tokens
        assert usage.cost_micros == 0  # the embedded model costs nothing
