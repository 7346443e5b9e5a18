"""``CourseKnowledge``: what a course shares with its students' agents, and nothing else.

Two things per course, both put there by its teacher: course material (files indexed into a
knowledge base the students' agents search with ``search_knowledge_base``), and shared answers
(a question and its answer; when a student asks something similar, the answer is offered to
their agent as context, and ``offered`` and ``tokens_saved`` count it per course: the tokens a
model would spend writing that answer again). A student's own sessions never enter either: only
what a teacher uploads or writes as a shared answer does. The knowledge bases live beside the
service's data: one SQLite file per course and kind under ``data_dir/knowledge``, or tables
in the service's PostgreSQL database. Embedding runs in this process (MiniLM, offline).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from agentica.context.tokens import estimate_tokens
from agentica.errors import UsageError
from agentica.knowledge import Hit, Knowledge
from agentica.knowledge.embedders import Embedder
from agentica.run.capability import Capability
from agentica.tools.context import RunContext
from agentica_team.db.schema import new_id, shared_answers
from agentica_team.errors import BadRequest, NotFound, TeamError

if TYPE_CHECKING:
    from agentica.knowledge.stores import KnowledgeStore
    from agentica_team.audit import Audit
    from agentica_team.db.engine import Database
    from agentica_team.settings import TeamSettings

__all__ = [
    "MAX_MATERIAL_BYTES",
    "CourseKnowledge",
    "SharedAnswer",
    "SharedAnswers",
    "check_material_name",
]

log = logging.getLogger(__name__)

MAX_MATERIAL_BYTES = 5_000_000
MAX_QUESTION_CHARS = 2_000
MAX_ANSWER_CHARS = 20_000
SIMILAR = 0.7  # the cosine similarity from which a shared answer is offered (MiniLM)
MAX_OPEN = 64  # knowledge bases kept open (least recently used closed beyond)
_NAME = re.compile(r"^\w[\w .()\-]{0,150}\.(md|markdown|txt|rst|html|htm|pdf|py|json|csv)$")


@dataclass(frozen=True, slots=True)
class SharedAnswer:
    id: str
    course_id: str
    question: str
    answer: str
    tokens: int
    shared_by: str
    created_at: float
    offered: int = 0
    tokens_saved: int = 0


def _answer(row: Any) -> SharedAnswer:
    return SharedAnswer(row.id, row.course_id, row.question, row.answer, row.tokens,
                        row.shared_by, row.created_at, row.offered, row.tokens_saved)  # fmt: skip


def check_material_name(name: str) -> str:
    """``name`` if it is a plain file name of a kind the knowledge base loads, else
    ``BadRequest`` saying what is allowed (no folders, no ``..``, no hidden files)."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise BadRequest(
            f"{name[:80]!r} is not a material name: use a plain file name (letters, digits, "
            "spaces, . _ - ( )) ending in .md, .txt, .rst, .html, .pdf, .py, .json or .csv"
        )
    return name


class CourseKnowledge:
    """The course material and shared answers of every course (see the module).

    Args:
        settings: where the knowledge bases live (``data_dir``, ``database``).
        db: the service database (shared answers' rows).
        audit: every change is audited.
        embedder: default MiniLM.
    """

    def __init__(
        self,
        settings: TeamSettings,
        db: Database,
        audit: Audit,
        *,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.audit = audit
        self._embedder = embedder
        self._bases: OrderedDict[tuple[str, str], Knowledge] = OrderedDict()
        self._lock = asyncio.Lock()
        self._pool: Any = None  # PostgreSQL: one pool for every course's tables

    @staticmethod
    def missing() -> str | None:
        """What this server lacks for course knowledge (the ``knowledge`` extra), or ``None``."""
        for module in ("numpy", "safetensors", "tokenizers", "sqlite_vec", "pysqlite3"):
            if importlib.util.find_spec(module) is None:
                return (
                    f"course knowledge needs the agentica[knowledge] extra on the server "
                    f"({module} is not installed)"
                )
        return None

    def _embedder_or_default(self) -> Embedder:
        if self._embedder is None:
            from agentica.knowledge import MiniLM

            self._embedder = MiniLM()
        return self._embedder

    async def _store(self, course_id: str, kind: str) -> KnowledgeStore:
        digest = hashlib.sha256(course_id.encode()).hexdigest()[:20]
        if self.db.dialect == "postgresql":
            import asyncpg  # type: ignore[import-untyped]

            from agentica.knowledge import PostgresKnowledgeStore

            url = self.settings.database.replace("+asyncpg", "")
            if self._pool is None:
                self._pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
            return PostgresKnowledgeStore(url, table=f"team_kb_{kind[0]}_{digest}",
                                          pool=self._pool)  # fmt: skip
        from agentica.knowledge import SQLiteKnowledgeStore

        return SQLiteKnowledgeStore(self.settings.data_dir / "knowledge" / f"{digest}-{kind}.db")

    async def base(self, course_id: str, kind: str = "material") -> Knowledge:
        """The course's knowledge base of ``kind`` (``material`` or ``answers``), opened; the
        least recently used are closed beyond ``MAX_OPEN`` (``BadRequest`` when this server
        cannot hold course knowledge)."""
        if (why := self.missing()) is not None:
            raise BadRequest(why)
        key = (course_id, kind)
        async with self._lock:
            if key in self._bases:
                self._bases.move_to_end(key)
                return self._bases[key]
            try:
                kb = Knowledge(await self._store(course_id, kind),
                               embedder=self._embedder_or_default())  # fmt: skip
                await kb.sources()  # (opens it: a failure is said here, once)
            except UsageError as exc:
                raise BadRequest(f"course knowledge is not available here: {exc}") from None
            self._bases[key] = kb
            closing = []
            while len(self._bases) > MAX_OPEN:
                closing.append(self._bases.popitem(last=False)[1])
        for old in closing:
            await old.aclose()
        return kb

    # -- material ------------------------------------------------------------------------------

    async def add_material(self, course_id: str, actor_id: str, name: str, data: bytes) -> int:
        """Index an uploaded file as ``name`` (again: replaced); the chunks written."""
        check_material_name(name)
        if len(data) > MAX_MATERIAL_BYTES:
            raise BadRequest(f"{name} is larger than {MAX_MATERIAL_BYTES // 1_000_000} MB")
        kb = await self.base(course_id)
        try:
            chunks = await kb.add_bytes(name, data)
        except UsageError as exc:
            raise BadRequest(str(exc)) from None
        data_ = {"bytes": len(data), "chunks": chunks}
        await self.audit.record(
            "knowledge_added", actor_id=actor_id, course_id=course_id, subject=name, data=data_
        )
        return chunks

    async def remove_material(self, course_id: str, actor_id: str, name: str) -> None:
        kb = await self.base(course_id)
        if name not in await kb.sources():
            raise NotFound(f"no material {name!r} in this course")
        await kb.remove(name)
        await self.audit.record("knowledge_removed", actor_id=actor_id, course_id=course_id,
                                subject=name)  # fmt: skip

    async def materials(self, course_id: str) -> list[str]:
        return await (await self.base(course_id)).sources()

    async def search(self, course_id: str, query: str, k: int = 5) -> list[Hit]:
        kb = await self.base(course_id)
        if not query.strip():
            raise BadRequest("the query is empty")
        return await kb.search(query, max(1, min(k, 20)))

    # -- shared answers ------------------------------------------------------------------------

    async def share(
        self, course_id: str, actor_id: str, question: str, answer: str
    ) -> SharedAnswer:
        question, answer = question.strip(), answer.strip()
        if not question or not answer:
            raise BadRequest("a shared answer needs a question and an answer")
        if len(question) > MAX_QUESTION_CHARS or len(answer) > MAX_ANSWER_CHARS:
            raise BadRequest(f"the question may have {MAX_QUESTION_CHARS} characters and the "
                             f"answer {MAX_ANSWER_CHARS}")  # fmt: skip
        shared = SharedAnswer(new_id("a"), course_id, question, answer,
                              estimate_tokens(answer), actor_id, time.time())  # fmt: skip
        kb = await self.base(course_id, "answers")
        async with self.db.write() as conn:
            await conn.execute(shared_answers.insert().values(
                id=shared.id, course_id=course_id, question=question, answer=answer,
                tokens=shared.tokens, shared_by=actor_id, created_at=shared.created_at,
            ))  # fmt: skip
            await self.audit.record_in(conn, "answer_shared", actor_id=actor_id,
                                       course_id=course_id, subject=shared.id,
                                       data={"question": question[:200]})  # fmt: skip
        try:  # (the row first: an index entry without its row would hide others)
            await kb.add_text(shared.id, question)  # questions are matched with questions
        except BaseException:
            where = shared_answers.c.id == shared.id
            async with self.db.write() as conn:
                await conn.execute(shared_answers.delete().where(where))
            raise
        return shared

    async def unshare(self, course_id: str, actor_id: str, answer_id: str) -> None:
        where = (shared_answers.c.id == answer_id) & (shared_answers.c.course_id == course_id)
        async with self.db.read() as conn:
            if await conn.scalar(sa.select(shared_answers.c.id).where(where)) is None:
                raise NotFound(f"no shared answer {answer_id!r} in this course")
        await (await self.base(course_id, "answers")).remove(answer_id)  # (the index first)
        async with self.db.write() as conn:
            gone = await conn.execute(shared_answers.delete().where(where))
            if not gone.rowcount:
                raise NotFound(f"no shared answer {answer_id!r} in this course")
            await self.audit.record_in(conn, "answer_unshared", actor_id=actor_id,
                                       course_id=course_id, subject=answer_id)  # fmt: skip

    async def answers(self, course_id: str) -> list[SharedAnswer]:
        query = (
            sa.select(shared_answers)
            .where(shared_answers.c.course_id == course_id)
            .order_by(shared_answers.c.created_at)
        )
        async with self.db.read() as conn:
            return [_answer(row) for row in await conn.execute(query)]

    async def offer(self, course_id: str, question: str) -> SharedAnswer | None:
        """The shared answer of the course for a question like ``question`` (cosine at least
        ``SIMILAR``), counted as offered; ``None`` if there is none."""
        if not question.strip():
            return None
        kb = await self.base(course_id, "answers")
        if not await kb.sources():
            return None
        [vector] = await kb.embedder.embed([question[:MAX_QUESTION_CHARS]])
        close = [
            c.source for c, score in await kb.store.vector_search(vector, 5) if score >= SIMILAR
        ]
        if not close:
            return None
        mine = (shared_answers.c.id.in_(close)) & (shared_answers.c.course_id == course_id)
        async with self.db.write() as conn:
            rows = {r.id: r for r in await conn.execute(sa.select(shared_answers).where(mine))}
            row = next((rows[i] for i in close if i in rows), None)  # (the closest with a row)
            if row is None:
                return None
            where = shared_answers.c.id == row.id
            await conn.execute(
                shared_answers.update().where(where).values(
                    offered=shared_answers.c.offered + 1,
                    tokens_saved=shared_answers.c.tokens_saved + row.tokens,
                )
            )  # fmt: skip
        return _answer(row)

    async def aclose(self) -> None:
        async with self._lock:
            bases, self._bases = list(self._bases.values()), OrderedDict()
            pool, self._pool = self._pool, None
        for kb in bases:
            await kb.aclose()
        if pool is not None:
            await pool.close()


OFFER = (
    "Your teacher shared this answer to a question like the student's in this course. If it "
    "answers what the student asks, use it (say it comes from the course); if not, ignore "
    "it.\nQuestion: {question}\nAnswer: {answer}"
)


class SharedAnswers(Capability):
    """Offers a student's agent the course's shared answer to a question like theirs: looked
    up once per run (the run's input), shown in a system slot, counted by ``CourseKnowledge``."""

    name = "shared_answers"

    def __init__(self, knowledge: CourseKnowledge, course_id: str) -> None:
        self.knowledge = knowledge
        self.course_id = course_id

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        if self.name not in ctx.state:
            try:
                found = await self.knowledge.offer(self.course_id, ctx.input)
            except TeamError as exc:  # (the run goes on without an offer)
                log.warning("no shared answer offered in %s: %s", self.course_id, exc)
                found = None
            ctx.state[self.name] = (
                OFFER.format(question=found.question, answer=found.answer) if found else ""
            )
        return str(ctx.state[self.name]) or None
