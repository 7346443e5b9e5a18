"""Course knowledge over HTTP: a teacher's material and shared answers reach the students'
agents of that course, and nothing of a student's own sessions reaches anyone else."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.team.conftest import Api, LiveTeam, Person

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sqlite_vec") is None or importlib.util.find_spec("numpy") is None,
    reason="the knowledge extra is not installed",
)

SYLLABUS = (
    "# Syllabus\n\n## Exam\n\nThe final exam is on 12 June in room B204. Bring a pen.\n\n"
    "## Homework\n\nHomework is due every Friday.\n"
)
QUESTION = "How do I submit my homework?"
ANSWER = "Upload it as a PDF on the course page before Friday 18:00."
SECRET = "zebra-7431"  # what S1 tells their agent: nobody else may see it


@pytest.fixture(scope="module")
def live(live_team: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTeam]:
    with live_team(tmp_path_factory.mktemp("knowledge")) as running:
        yield running


async def ask(api: Api, student: Person, course: str, text: str) -> str:
    """A new session of ``student`` in ``course`` with one message, answered; its id."""
    done = await api.call("POST", "/api/sessions", token=student.token,
                          json={"course_id": course, "title": "a question"})  # fmt: skip
    assert done.status == 201, done.text()
    session = done.json()["id"]
    path = f"/api/sessions/{session}/messages"
    sent = await api.call("POST", path, token=student.token, json={"text": text})
    assert sent.status == 202, sent.text()
    for _ in range(600):
        listed = await api.call("GET", path, token=student.token)
        if listed.json()[-1]["state"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.05)
    assert listed.json()[-1]["state"] == "done", listed.text()
    return str(session)


def requests_with(live: LiveTeam, text: str) -> list[dict[str, Any]]:
    return [body for body in live.upstream.requests if text in json.dumps(body)]


def test_material_and_shared_answers_reach_the_course_and_only_it(live: LiveTeam) -> None:
    room = live.room
    course = f"/api/courses/{room.course_a}"

    async def scenario() -> None:
        async with Api(live.url) as api:
            # the teacher uploads material; members list and search it
            put = await api.call("PUT", f"{course}/knowledge/syllabus.md", token=room.ta.token,
                                 data=SYLLABUS.encode())  # fmt: skip
            assert put.status == 200, put.text()
            assert put.json()["name"] == "syllabus.md" and put.json()["chunks"] >= 1
            listed = await api.call("GET", f"{course}/knowledge", token=room.s1.token)
            assert [m["name"] for m in listed.json()] == ["syllabus.md"]
            found = await api.call("GET", f"{course}/knowledge/search?q=when+is+the+exam&k=1",
                                   token=room.s1.token)  # fmt: skip
            [hit] = found.json()
            assert hit["source"] == "syllabus.md" and "B204" in hit["text"]
            # who may not: a student uploading, outsiders, names that are not plain files
            refused = [
                (await api.call("PUT", f"{course}/knowledge/x.md", token=room.s1.token,
                                data=b"x")).status,
                (await api.call("PUT", f"{course}/knowledge/x.md", token=room.tb.token,
                                data=b"x")).status,
                (await api.call("GET", f"{course}/knowledge", token=room.s3.token)).status,
                (await api.call("PUT", f"{course}/knowledge/x.exe", token=room.ta.token,
                                data=b"x")).status,
                (await api.call("PUT", f"{course}/knowledge/.hidden.md", token=room.ta.token,
                                data=b"x")).status,
                (await api.call("PUT", f"{course}/knowledge/..%2Fup.md", token=room.ta.token,
                                data=b"x")).status,
            ]  # fmt: skip
            assert refused[:3] == [403, 404, 404], refused
            assert all(status in (400, 404) for status in refused[3:]), refused

            # the teacher shares an answer; a student asking something like it gets it offered
            shared = await api.call("POST", f"{course}/shared-answers", token=room.ta.token,
                                    json={"question": QUESTION, "answer": ANSWER})  # fmt: skip
            assert shared.status == 201, shared.text()
            answer = shared.json()
            assert answer["tokens"] > 0 and answer["offered"] == 0
            await ask(api, room.s1, room.course_a, f"How can I submit my homework ({SECRET})?")
            [request] = requests_with(live, SECRET)[:1]
            system = " ".join(m["content"] for m in request["messages"]
                              if m["role"] == "system")  # fmt: skip
            assert ANSWER in system
            assert "search_knowledge_base" in {t["function"]["name"] for t in request["tools"]}
            counted = await api.call("GET", f"{course}/shared-answers", token=room.s2.token)
            [row] = counted.json()
            assert row["offered"] == 1 and row["tokens_saved"] == answer["tokens"]

            # S1's message reaches no one else: not S2's search, not S2's agent, not course B
            found = await api.call("GET", f"{course}/knowledge/search?q={SECRET}",
                                   token=room.s2.token)  # fmt: skip
            assert SECRET not in found.text()
            before = len(live.upstream.requests)
            await ask(api, room.s2, room.course_a, f"what did my classmate write about {SECRET}?")
            later = live.upstream.requests[before:]
            assert all(ANSWER not in json.dumps(b) for b in later)  # (not similar: not offered)
            assert sum(json.dumps(b).count(SECRET) for b in later) == len(later)  # S2's own only
            await ask(api, room.s3, room.course_b, QUESTION)
            assert all(ANSWER not in json.dumps(b) for b in live.upstream.requests[before:][-3:])
            outsider = await api.call("GET", f"{course}/shared-answers", token=room.s3.token)
            assert outsider.status == 404

            # taking them back, audited
            gone = await api.call("DELETE", f"{course}/shared-answers/{answer['id']}",
                                  token=room.ta.token)  # fmt: skip
            assert gone.status == 204
            gone = await api.call("DELETE", f"{course}/knowledge/syllabus.md", token=room.ta.token)
            assert gone.status == 204
            assert (await api.call("GET", f"{course}/knowledge", token=room.s1.token)).json() == []
            audit = await api.call("GET", f"{course}/audit", token=room.ta.token)
            kinds = {r["kind"] for r in audit.json()}
            assert {"knowledge_added", "knowledge_removed", "answer_shared",
                    "answer_unshared"} <= kinds  # fmt: skip

    live.run(scenario(), timeout=300)


def test_the_bases_live_beside_the_service_data(live: LiveTeam) -> None:
    folder = Path(live.settings.data_dir) / "knowledge"
    assert folder.is_dir() and any(p.suffix == ".db" for p in folder.iterdir())
