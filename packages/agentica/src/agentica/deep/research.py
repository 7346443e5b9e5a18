"""``DeepResearch``: a question over documents to a Markdown report whose claims cite evidence.

A planner splits the question into sub-questions (kept in the variable space as
``research.plan``). Each sub-question is analysed in parallel, at most ``max_parallel`` at a
time, and a failure never cancels the others: the orchestrator searches the knowledge base and
archives every result as evidence (``evidence.research.<n>``, numbered ``[n]`` across the run),
and an analysis agent writes a chain-of-analysis block, findings that each end with the numbers
of the sources they rest on. A block whose citations do not resolve is sent back once with a
stricter instruction, then its sub-question fails with the reason (no citation is invented).
A writer turns the valid blocks into the report; the checker counts the report's claims and the
citations that resolve; a report with a stray citation, or citing too few of its claims, is
assembled from the blocks instead.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentica.agent import Agent
from agentica.errors import AgenticaError, UsageError
from agentica.knowledge.base import Hit, Knowledge
from agentica.knowledge.stores import words
from agentica.models.base import Model, ModelSettings
from agentica.run.capability import Capability
from agentica.storage.base import Storage
from agentica.storage.memory import InMemoryStorage

__all__ = [
    "AnalysisBlock",
    "CitationCheck",
    "DeepResearch",
    "Evidence",
    "Finding",
    "ResearchReport",
    "SubtaskResult",
    "check_citations",
]

PLANNER = (
    "You plan research. Split the user's question into at most {n} short, separate "
    "sub-questions that documents can answer. Write only the sub-questions, one per line, "
    "nothing else. A simple question needs only one."
)
ANALYST = (
    "You answer one research sub-question from numbered sources. Use only what the sources "
    "say. Write 1 to 4 findings, one per line, each starting with '- ': a short claim that "
    "ends with the numbers of the sources it rests on in square brackets, like "
    "'- The key stays on the server [2].' Then one line 'Conclusion: ...', also with its "
    "source numbers. If the sources do not answer the sub-question, write one finding saying "
    "what they do say, with its numbers."
)
STRICTER = (
    "Your findings could not be used: {problems}. The sources are numbered {first} to {last}. "
    "Write the findings again: every line starts with '- ', and every finding ends with "
    "[n], the number of a source above that says it. Cite no other number."
)
WRITER = (
    "You write a short research report in Markdown from checked findings. Start with a '# ' "
    "title, then a paragraph that answers the question, then one '## ' section per "
    "sub-question. Keep the source numbers in square brackets after every claim, exactly as "
    "the findings have them; add no claim without one, and no number that is not there."
)

ATTRIBUTE = 0.6  # the share of a finding's words one source must hold to be its source
WRITER_SHARE = 0.8  # the share of its claims a writer's report must cite to be used
_CITATION = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One archived search result: ``[number]`` in the report, ``key`` in the variable
    space."""

    number: int
    key: str
    source: str
    location: str
    heading: str
    text: str

    @property
    def citation(self) -> str:
        return f"{self.source}, {self.location}"


@dataclass(frozen=True, slots=True)
class Finding:
    claim: str
    citations: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AnalysisBlock:
    """A sub-question's chain of analysis: findings that cite evidence, then a conclusion."""

    subtask: str
    findings: tuple[Finding, ...]
    conclusion: str = ""


@dataclass
class SubtaskResult:
    """A sub-question's outcome: its block, or why it failed; the evidence it was given."""

    subtask: str
    evidence: list[Evidence] = field(default_factory=list)
    block: AnalysisBlock | None = None
    error: str | None = None
    attempts: int = 0
    seconds: float = 0.0


@dataclass
class CitationCheck:
    """The report's claims (sentences and list items, headings and the source list aside),
    how many cite evidence that exists, and the citations that do not resolve."""

    claims: int = 0
    cited: int = 0
    invalid: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.cited / self.claims if self.claims else 0.0


@dataclass
class ResearchReport:
    question: str
    plan: list[str]
    subtasks: list[SubtaskResult]
    evidence: dict[int, Evidence]
    markdown: str
    citations: CitationCheck
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def check_citations(markdown: str, evidence: dict[int, Evidence]) -> CitationCheck:
    """Count the claims of ``markdown`` and which cite evidence that exists (``[n]`` of a
    numbered evidence entry)."""
    check = CitationCheck()
    body = markdown.split("\n## Sources", 1)[0]
    for line in body.splitlines():
        text = line.strip()
        if not text or text.startswith(("#", "```")):
            continue
        text = _BULLET.sub("", text)
        sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if len(s.split()) >= 3]
        for sentence in sentences:
            check.claims += 1
            numbers = [int(n) for group in _CITATION.findall(sentence)
                       for n in re.split(r"\s*[,;]\s*", group)]  # fmt: skip
            bad = [n for n in numbers if n not in evidence]
            check.invalid.extend(f"[{n}]" for n in bad)
            if numbers and not bad:
                check.cited += 1
    return check


def _numbers_in(text: str) -> tuple[int, ...]:
    """The source numbers cited in ``text`` (``[2]``, ``[1, 3]``), in order."""
    return tuple(int(n) for group in _CITATION.findall(text)
                 for n in re.split(r"\s*[,;]\s*", group))  # fmt: skip


def _parse_plan(text: str, question: str, limit: int) -> list[str]:
    lines = []
    for line in text.splitlines():
        item = _BULLET.sub("", line).strip().strip('"')
        if len(item.split()) >= 3 and not item.lower().startswith(("sub-question", "here are")):
            lines.append(item)
    unique = list(dict.fromkeys(lines))[:limit]
    return unique or [question]


def _source_of(claim: str, sources: Sequence[Evidence]) -> int | None:
    """The one source that holds most of ``claim``'s words (at least ``ATTRIBUTE``), for a
    finding written without its number; ``None`` when no source, or more than one, does."""
    wanted = {w for w in words(claim) if len(w) > 3}
    if len(wanted) < 3:
        return None
    shares = sorted(
        ((len(wanted & set(words(e.text))) / len(wanted), e.number) for e in sources),
        reverse=True,
    )
    if not shares or shares[0][0] < ATTRIBUTE:
        return None
    if len(shares) > 1 and shares[1][0] == shares[0][0]:
        return None
    return shares[0][1]


def _parse_block(
    text: str, subtask: str, sources: Sequence[Evidence] = ()
) -> tuple[AnalysisBlock, list[str]]:
    """The findings of an analyst's reply, and what is wrong with their citations (numbers
    are checked by the caller). A finding without a number whose words are in one source is
    attributed to it (``_source_of``): found in the text, not invented."""
    findings: list[Finding] = []
    conclusion = ""
    problems: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.lower().startswith("conclusion:"):
            conclusion = stripped.split(":", 1)[1].strip()
            continue
        if not _BULLET.match(stripped):
            continue
        claim = _BULLET.sub("", stripped).strip()
        numbers = _numbers_in(claim)
        if not numbers and (found := _source_of(claim, sources)) is not None:
            claim, numbers = f"{claim.rstrip()} [{found}]", (found,)
        if not numbers:
            problems.append(f"the finding {claim[:60]!r} cites no source")
            continue
        findings.append(Finding(claim, numbers))
    if not findings and not problems:
        problems.append("there were no findings (lines starting with '- ')")
    return AnalysisBlock(subtask, tuple(findings), conclusion), problems


class DeepResearch:
    """Research a question over a knowledge base (and the web, with ``web``).

    Args:
        knowledge: the documents to search.
        model: the model of every step (default: the default model).
        max_subtasks: the most sub-questions the planner may make.
        max_parallel: sub-questions analysed at once.
        sources_per_subtask: search results given to each analysis.
        storage: where the plan, blocks and evidence are kept (default: in memory).
        model_settings: the settings of every model call (temperature, max_tokens).
        capabilities: more capabilities for the analysis agents (``Web()`` to let them read
            pages; their tool outputs are archived as evidence too).
        on_event: called with a short line whenever a step starts or ends (progress).
    """

    def __init__(
        self,
        knowledge: Knowledge,
        *,
        model: Model | str | None = None,
        max_subtasks: int = 3,
        max_parallel: int = 3,
        sources_per_subtask: int = 4,
        storage: Storage | None = None,
        model_settings: ModelSettings | None = None,
        capabilities: Sequence[Capability] = (),
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if max_subtasks < 1 or max_parallel < 1 or sources_per_subtask < 1:
            raise UsageError("max_subtasks, max_parallel and sources_per_subtask must be >= 1")
        self.knowledge = knowledge
        self.model = model
        self.max_subtasks = max_subtasks
        self.max_parallel = max_parallel
        self.sources_per_subtask = sources_per_subtask
        self.storage = storage if storage is not None else InMemoryStorage()
        self.model_settings = model_settings
        self.capabilities = list(capabilities)
        self.on_event = on_event

    def _say(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)

    def _agent(self, instructions: str, session: str) -> Agent[str]:
        return Agent(model=self.model, instructions=instructions, storage=self.storage,
                     user_id="research", session_id=session, model_settings=self.model_settings,
                     capabilities=list(self.capabilities))  # fmt: skip

    async def run(self, question: str, *, session: str = "research") -> ResearchReport:
        """The report for ``question``; the plan, blocks and evidence stay in ``storage``
        under (``"research"``, ``session``)."""
        if not question.strip():
            raise UsageError("the research question is empty")
        started = time.perf_counter()
        planner = self._agent(PLANNER.format(n=self.max_subtasks), f"{session}.plan")
        self._say("planning")
        reply = (await planner.run(question)).content or ""
        plan = _parse_plan(str(reply), question, self.max_subtasks)
        await self.storage.set_variable("research", session, "research.plan", plan,
                                        summary=f"{len(plan)} sub-questions")  # fmt: skip
        self._say(f"plan: {len(plan)} sub-questions")
        evidence: dict[int, Evidence] = {}
        numbers: dict[tuple[str, int], int] = {}
        subtasks = [SubtaskResult(s) for s in plan]
        for result in subtasks:  # evidence first, in order, so that numbers are stable
            hits = await self.knowledge.search(result.subtask, self.sources_per_subtask)
            result.evidence = [await self._archive(session, hit, evidence, numbers) for hit in hits]
        gate = asyncio.Semaphore(self.max_parallel)

        async def analyse(n: int, result: SubtaskResult) -> None:
            async with gate:
                self._say(f"analysing {n + 1}/{len(subtasks)}: {result.subtask}")
                began = time.perf_counter()
                try:
                    await self._analyse(session, n, result, evidence)
                except (AgenticaError, OSError) as exc:  # (the others go on)
                    result.error = f"{type(exc).__name__}: {exc}"
                result.seconds = time.perf_counter() - began
                self._say(f"{'failed' if result.error else 'done'} {n + 1}/{len(subtasks)}")

        async with asyncio.TaskGroup() as group:
            for n, result in enumerate(subtasks):
                group.create_task(analyse(n, result))
        report = await self._write(session, question, plan, subtasks, evidence)
        report.seconds = time.perf_counter() - started
        return report

    async def _archive(
        self,
        session: str,
        hit: Hit,
        evidence: dict[int, Evidence],
        numbers: dict[tuple[str, int], int],
    ) -> Evidence:
        key = (hit.chunk.source, hit.chunk.position)
        if key in numbers:
            return evidence[numbers[key]]
        number = len(evidence) + 1
        entry = Evidence(number, f"evidence.research.{number}", hit.chunk.source,
                         hit.chunk.location, hit.chunk.heading, hit.chunk.text)  # fmt: skip
        value = {"source": entry.source, "location": entry.location, "heading": entry.heading,
                 "text": entry.text}  # fmt: skip
        await self.storage.set_variable("research", session, entry.key, value,
                                        summary=f"[{number}] {entry.citation}")  # fmt: skip
        evidence[number] = entry
        numbers[key] = number
        return entry

    async def _analyse(
        self, session: str, n: int, result: SubtaskResult, evidence: dict[int, Evidence]
    ) -> None:
        if not result.evidence:
            result.error = "the knowledge base has nothing on this sub-question"
            return
        sources = "\n\n".join(f"[{e.number}] ({e.citation})\n{e.text}" for e in result.evidence)
        allowed = {e.number for e in result.evidence}
        agent = self._agent(ANALYST, f"{session}.analysis.{n + 1}")
        prompt = f"Sub-question: {result.subtask}\n\nSources:\n{sources}"
        for attempt in (1, 2):
            result.attempts = attempt
            reply = str((await agent.run(prompt)).content or "")
            block, problems = _parse_block(reply, result.subtask, result.evidence)
            cited = [f.citations for f in block.findings]
            cited.append(_numbers_in(block.conclusion))
            for given in cited:
                stray = [c for c in given if c not in allowed]
                if stray:
                    problems.append(f"{', '.join(f'[{c}]' for c in stray)} is not a source here")
            if not problems and block.findings:
                result.block = block
                value = {"subtask": block.subtask, "conclusion": block.conclusion,
                         "findings": [{"claim": f.claim,
                                       "evidence": [evidence[c].key for c in f.citations]}
                                      for f in block.findings]}  # fmt: skip
                await self.storage.set_variable("research", session, f"research.block.{n + 1}",
                                                value, summary=result.subtask[:60])  # fmt: skip
                return
            first, last = min(allowed), max(allowed)
            prompt = STRICTER.format(problems="; ".join(problems), first=first, last=last)
        result.error = "its findings did not cite the sources after a second try: " + "; ".join(
            problems
        )

    async def _write(
        self,
        session: str,
        question: str,
        plan: list[str],
        subtasks: list[SubtaskResult],
        evidence: dict[int, Evidence],
    ) -> ResearchReport:
        valid = [r for r in subtasks if r.block is not None]
        notes = [f"sub-question {r.subtask!r} failed: {r.error}" for r in subtasks if r.error]
        assembled = _assemble(question, valid)
        markdown = assembled
        if valid:
            self._say("writing the report")
            findings = "\n\n".join(
                f"Sub-question: {r.subtask}\n" + "\n".join(f"- {f.claim}" for f in r.block.findings)
                + (f"\nConclusion: {r.block.conclusion}" if r.block.conclusion else "")
                for r in valid if r.block is not None
            )  # fmt: skip
            writer = self._agent(WRITER, f"{session}.writer")
            try:
                written = str((await writer.run(f"Question: {question}\n\n{findings}")).content)
            except AgenticaError as exc:
                written = ""
                notes.append(f"the writer failed ({exc}); the report is assembled from the blocks")
            check = check_citations(written, evidence)
            if written and not check.invalid and check.share >= WRITER_SHARE:
                markdown = written.strip()
            elif written:
                why = (f"invalid citations {check.invalid}" if check.invalid else
                       f"{check.cited} of {check.claims} claims cited")  # fmt: skip
                notes.append(f"the writer's report had {why}; the report is assembled from the "
                             "checked findings")  # fmt: skip
        cited = sorted(n for n in set(_numbers_in(markdown)) if n in evidence)
        if cited:
            markdown += "\n\n## Sources\n\n" + "\n".join(
                f"[{n}] {evidence[n].citation} (`{evidence[n].key}`)" for n in cited
            )
        check = check_citations(markdown, evidence)
        await self.storage.set_variable("research", session, "research.report", markdown,
                                        summary=question[:60])  # fmt: skip
        return ResearchReport(question, plan, subtasks, evidence, markdown, check, notes)


def _assemble(question: str, valid: list[SubtaskResult]) -> str:
    """The report from the checked blocks alone: one section per sub-question."""
    if not valid:
        return f"# {question}\n\nNo sub-question could be answered from the sources."
    parts = [f"# {question}"]
    conclusions = [r.block.conclusion for r in valid if r.block and r.block.conclusion]
    if conclusions and all(_CITATION.search(c) for c in conclusions):
        parts.append(" ".join(conclusions))
    for result in valid:
        findings = result.block.findings if result.block is not None else ()
        parts.append(f"## {result.subtask}")
        parts.append("\n".join(f"- {f.claim}" for f in findings))
    return "\n\n".join(parts)
