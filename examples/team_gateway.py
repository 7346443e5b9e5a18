"""The team service in one script: a teacher, a course, a budget, a student, and the student's
own OpenAI client using the class model through the gateway, without ever seeing the key.

The course's model here is a scripted OpenAI-compatible server on 127.0.0.1 so the example runs
anywhere; a real class sets `model` / `model_api_key` on the course (or runs the embedded model).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import uvicorn
from openai import AsyncOpenAI, RateLimitError

from agentica.testing import FakeOpenAIServer
from agentica_team.app import create_app
from agentica_team.principal import Principal
from agentica_team.service import Team
from agentica_team.settings import TeamSettings


async def main() -> None:
    upstream = FakeOpenAIServer(lambda body: "Grid lays out rows and columns at once.")
    async with upstream:
        with tempfile.TemporaryDirectory() as data:
            settings = TeamSettings(database_url=f"sqlite:///{Path(data) / 'team.db'}")
            team = await Team.open(settings)
            try:
                await classroom(team, upstream.base_url)
            finally:
                await team.aclose()


async def classroom(team: Team, upstream_url: str) -> None:
    # what `agentica team add-user/create-course/add-students` and the teacher's routes do
    teacher = await team.accounts.create_user("teacher@school.edu", role="teacher")
    me = Principal(teacher.id, teacher.email, teacher.name, teacher.role, "system")
    course = await team.accounts.create_course(me, "web-2026")
    await team.accounts.update_course(
        course.id,
        actor=teacher.id,
        model="class-model",
        model_base_url=upstream_url,
        model_api_key="sk-the-provider-key-stays-on-the-server",
    )
    await team.budgets.set_budget(course.id, scope="student", period="day", max_tokens=1050)
    [ann] = await team.accounts.add_students(course, [("ann@school.edu", "Ann")], actor=me.user_id)
    print("provisioned:", ann.connect.replace(ann.token, "agt_..."))

    app = await asyncio.to_thread(create_app, team=team)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # it failed to start: raise why
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        student = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=ann.token)
        reply = await student.chat.completions.create(
            model="web-2026", messages=[{"role": "user", "content": "CSS grid in one line?"}]
        )
        print("answer:", reply.choices[0].message.content)
        try:
            await student.chat.completions.create(
                model="web-2026",
                messages=[{"role": "user", "content": "And flexbox?"}],
            )  # reserves the prompt + 1,024 output tokens: more than is left today
        except RateLimitError as exc:
            print("refused before any token was spent:", exc.body["message"])  # type: ignore[index]
        await student.close()
    finally:
        server.should_exit = True
        await serving
    [usage] = await team.budgets.usage(course.id)
    print(f"usage: {usage.requests} request, {usage.input_tokens + usage.output_tokens} tokens")
    [chain] = await team.audit.verify(course.id)
    print(f"audit: {chain.records} records, chain ok: {chain.ok}")


if __name__ == "__main__":
    asyncio.run(main())
