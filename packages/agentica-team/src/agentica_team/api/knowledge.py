"""Routes for what a course shares: its material (files its students' agents search) and its
shared answers (offered to its students' agents for similar questions). Its teacher changes
both; its members read them; nobody else learns that the course has any."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from agentica_team.access import course_as_member, course_as_teacher
from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS
from agentica_team.course_knowledge import SharedAnswer, check_material_name

__all__ = ["router"]

router = APIRouter(prefix="/api/courses", tags=["knowledge"], responses=ERRORS)


class MaterialOut(BaseModel):
    name: str = Field(description="The file's name, as uploaded.")
    chunks: int | None = Field(None, description="Chunks written by this upload (0: unchanged).")


class HitOut(BaseModel):
    source: str = Field(description="The material's name.")
    location: str = Field(description="Where in it: `lines 12-30` or `page 3`.")
    heading: str = Field(description="The headings above the text.")
    text: str
    score: float = Field(description="The fused rank score (higher is better).")


class SharedAnswerBody(BaseModel):
    question: str = Field(description="The question, as a student would ask it.")
    answer: str = Field(description="The answer to offer for it and for similar questions.")


class SharedAnswerOut(BaseModel):
    id: str
    question: str
    answer: str
    tokens: int = Field(description="The tokens writing the answer again would take (estimate).")
    created_at: float
    offered: int = Field(description="How often it was offered to a student's agent.")
    tokens_saved: int = Field(description="`offered` times `tokens`.")

    @classmethod
    def of(cls, shared: SharedAnswer) -> SharedAnswerOut:
        return cls(id=shared.id, question=shared.question, answer=shared.answer,
                   tokens=shared.tokens, created_at=shared.created_at, offered=shared.offered,
                   tokens_saved=shared.tokens_saved)  # fmt: skip


@router.get("/{course_id}/knowledge", response_model=list[MaterialOut])
async def list_material(course_id: str, team: TeamDep, me: PrincipalDep) -> list[MaterialOut]:
    """The course's material (members)."""
    await course_as_member(team, me, course_id)
    return [
        MaterialOut(name=name, chunks=None) for name in await team.knowledge.materials(course_id)
    ]


@router.put(
    "/{course_id}/knowledge/{name}",
    response_model=MaterialOut,
    openapi_extra={"requestBody": {"content": {"application/octet-stream": {}}}},
)
async def put_material(
    course_id: str, name: str, request: Request, team: TeamDep, me: PrincipalDep
) -> MaterialOut:
    """Upload a file as course material (the body is the file; Markdown, text, HTML, PDF,
    code), replacing one of the same name; its students' agents can then search it.
    Teachers of the course. Audited (``knowledge_added``)."""
    await course_as_teacher(team, me, course_id)
    check_material_name(name)
    data = await request.body()  # (bounded by the server's max_body_bytes)
    chunks = await team.knowledge.add_material(course_id, me.user_id, name, data)
    return MaterialOut(name=name, chunks=chunks)


@router.delete("/{course_id}/knowledge/{name}", status_code=204)
async def delete_material(course_id: str, name: str, team: TeamDep, me: PrincipalDep) -> None:
    """Remove a file from the course material. Audited (``knowledge_removed``)."""
    await course_as_teacher(team, me, course_id)
    await team.knowledge.remove_material(course_id, me.user_id, name)


@router.get("/{course_id}/knowledge/search", response_model=list[HitOut])
async def search_material(
    course_id: str,
    team: TeamDep,
    me: PrincipalDep,
    q: str = Query(description="What to look for.", max_length=1000),
    k: int = Query(5, ge=1, le=20, description="How many results."),
) -> list[HitOut]:
    """The course material's best chunks for ``q`` (members)."""
    await course_as_member(team, me, course_id)
    hits = await team.knowledge.search(course_id, q, k)
    return [HitOut(source=h.chunk.source, location=h.chunk.location, heading=h.chunk.heading,
                   text=h.chunk.text, score=h.score) for h in hits]  # fmt: skip


@router.get("/{course_id}/shared-answers", response_model=list[SharedAnswerOut])
async def list_shared_answers(
    course_id: str, team: TeamDep, me: PrincipalDep
) -> list[SharedAnswerOut]:
    """The course's shared answers, with how often each was offered and the tokens saved
    (members)."""
    await course_as_member(team, me, course_id)
    return [SharedAnswerOut.of(a) for a in await team.knowledge.answers(course_id)]


@router.post("/{course_id}/shared-answers", response_model=SharedAnswerOut, status_code=201)
async def share_answer(
    course_id: str, body: SharedAnswerBody, team: TeamDep, me: PrincipalDep
) -> SharedAnswerOut:
    """Share an answer with the course: offered to its students' agents for similar
    questions. Teachers of the course. Audited (``answer_shared``)."""
    await course_as_teacher(team, me, course_id)
    shared = await team.knowledge.share(course_id, me.user_id, body.question, body.answer)
    return SharedAnswerOut.of(shared)


@router.delete("/{course_id}/shared-answers/{answer_id}", status_code=204)
async def unshare_answer(course_id: str, answer_id: str, team: TeamDep, me: PrincipalDep) -> None:
    """Stop sharing an answer. Audited (``answer_unshared``)."""
    await course_as_teacher(team, me, course_id)
    await team.knowledge.unshare(course_id, me.user_id, answer_id)
