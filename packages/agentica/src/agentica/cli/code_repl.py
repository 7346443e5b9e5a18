"""The interactive ``agentica code`` session (``Repl``): tasks streamed with approvals, shell
commands, attachments, and the slash commands.

Type a task; the agent's work streams below it. ``@path`` attaches a file, ``!cmd`` runs a shell
command in the folder and shows its output to the agent with the next task. In ``ask`` mode each
write shows its diff and each command its command line: answer y (once), a (always for that
tool in this session) or n (with a reason the agent reads). Ctrl-C stops the current step (a
running command is stopped; the session stays consistent). The prompt itself (history,
completion, start-up before the agent stack is loaded) is ``code_prompt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from agentica.cli.code_prompt import COMMANDS
from agentica.cli.render import EventPrinter
from agentica.context import HistoryPolicy, transcript
from agentica.errors import AgenticaError, RunCancelled, UsageError
from agentica.run import model_summarizer
from agentica.run.approval import Decision, PendingCall
from agentica.run.result import RunResponse

__all__ = ["COMMANDS", "Repl", "exit_summary"]

_ATTACHED_CHARS = 20_000
_COMPACTED = "agentica_code_compacted_at"
_SHELL_CHARS = 8_000
_MENTION = re.compile(r"(?<!\S)@([\w./-]+)")


class Repl:
    """One interactive session over a ``Setup`` (``agentica.cli.code_session``)."""

    def __init__(
        self,
        setup: Any,
        console: Console,
        ask: Callable[[str], Awaitable[str]],
        new_model: Callable[[str], Any],
        new_session: Callable[[str | None, str | None], Awaitable[Any]],
        *,
        sandbox_set: bool = False,
    ) -> None:
        self.s = setup
        self.console = console
        self.ask = ask
        self.new_model = new_model
        self.new_session = new_session  # (session id or None for a new one, sandbox or None)
        self.sandbox_set = sandbox_set  # --sandbox was given: /approvals keeps it
        self.notes: list[str] = []  # shell output for the next task
        self.running: asyncio.Task[Any] | None = None

    @property
    def compacted_at(self) -> int | None:
        """The number of turns /compact summarised (kept in the session's state, so a resumed
        session replays only what came after, with the summary)."""
        value = self.s.agent.memory.state.get(_COMPACTED)
        return value if isinstance(value, int) else None

    @compacted_at.setter
    def compacted_at(self, turns: int | None) -> None:
        self.s.agent.memory.state[_COMPACTED] = turns

    def prompt_line(self) -> str:
        return f"[{self.s.mode.mode}] > "

    # ------------------------------------------------------------------ tasks

    async def task(self, text: str) -> None:
        """Run one task, asking about calls that need a decision; Ctrl-C stops it."""
        message = await self._with_attachments(text)
        if self.notes:
            message = "\n\n".join([*self.notes, message])
            self.notes.clear()
        if self.compacted_at is not None:
            kept = len(self.s.agent.memory.runs) - self.compacted_at
            self.s.agent.history = HistoryPolicy(max_runs=max(kept, 0))
        self.s.checkpoints.begin_turn(text[:60])
        self.running = asyncio.current_task()
        try:
            await self._run(message)
        except (RunCancelled, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.console.print("[yellow]interrupted[/] (the files are as the last step left them)")
        except AgenticaError as exc:
            self.console.print(f"[bold red]{type(exc).__name__}[/]: {escape(str(exc))}")
        finally:
            self.running = None
            await self._save()

    async def _save(self) -> None:
        """Store the checkpoints with the session (``/undo`` after ``--resume``)."""
        from agentica.cli.code_session import save_checkpoints

        note = await save_checkpoints(self.s)
        if note:
            self.console.print(f"[dim]{escape(note)}[/]")

    def _interrupt(self) -> None:
        if self.running is not None:
            self.running.cancel("interrupted by the user")

    @contextlib.contextmanager
    def _ctrl_c(self) -> Iterator[None]:
        """Ctrl-C stops the step while the agent works (a prompt in between, such as an
        approval question, installs and removes its own handler: ours is set for each stretch
        of work)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self._interrupt)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def _run(self, message: str) -> None:
        printer = EventPrinter(self.console)
        stream = self.s.agent.run_stream(message)
        while True:
            with self._ctrl_c():
                async with stream:
                    async for event in stream:
                        printer(event)
            printer._end_text()
            response: RunResponse[str] = stream.response
            if response.stop_reason != "paused":
                return
            decisions = {p.call_id: await self._decide(p) for p in response.pending}
            stream = self.s.agent.resume_stream(decisions)

    async def _decide(self, pending: PendingCall) -> Decision:
        self.console.print(f"\n[bold yellow]{pending.tool}[/] wants to run:")
        shown = pending.description or f"{pending.tool}({pending.arguments})"
        lexer = "diff" if shown.startswith("---") else "bash"
        self.console.print(Syntax(shown, lexer, theme="ansi_dark", word_wrap=True))
        while True:
            try:
                answer = (await self.ask("allow? [y]es / [a]lways / [n]o > ")).strip().lower()
            except (KeyboardInterrupt, EOFError):  # Ctrl-C / Ctrl-D at the question: no
                return Decision.reject("The user stopped this call.")
            if answer in ("y", "yes"):
                return Decision.approve()
            if answer in ("a", "always"):
                self.s.mode.allow_always(pending.tool)
                return Decision.approve()
            if answer in ("n", "no"):
                try:
                    reason = (await self.ask("why? (the agent reads this) > ")).strip()
                except (KeyboardInterrupt, EOFError):
                    reason = ""
                return Decision.reject(reason or "The user said no.")
            self.console.print("answer y, a or n")

    async def _with_attachments(self, text: str) -> str:
        """``text`` with the files it mentions as ``@path`` attached."""
        parts = [text]
        for name in dict.fromkeys(_MENTION.findall(text)):
            try:
                content = await self.s.checkpoints.read(name)
            except AgenticaError as exc:
                self.console.print(f"[dim]@{escape(name)} not attached: {escape(str(exc))}[/]")
                continue
            if len(content) > _ATTACHED_CHARS:
                content = content[:_ATTACHED_CHARS] + "\n[... cut]"
            parts.append(f"Attached file {name}:\n```\n{content}\n```")
        return "\n\n".join(parts)

    async def shell(self, command: str) -> None:
        """``!cmd``: run it in the folder, show its output; the agent sees it with the next task."""
        process = await asyncio.create_subprocess_shell(
            command, cwd=self.s.root, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            output, _ = await process.communicate()
        except asyncio.CancelledError:
            process.kill()
            raise
        text = output.decode(errors="replace")
        self.console.print(escape(text.rstrip()) or "[dim](no output)[/]")
        self.console.print(f"[dim]exit code {process.returncode}[/]")
        if len(text) > _SHELL_CHARS:
            text = text[:_SHELL_CHARS] + "\n[... cut]"
        self.notes.append(
            f"I ran `{command}` in the folder (exit code {process.returncode}):\n```\n{text}\n```"
        )

    # ------------------------------------------------------------------ commands

    async def command(self, line: str) -> bool:
        """Run a slash command; ``False`` when it asks to quit."""
        name, _, argument = line.strip().partition(" ")
        argument = argument.strip()
        handlers: dict[str, Callable[[str], Awaitable[None]]] = {
            "/help": self._help, "/model": self._model, "/todos": self._todos,
            "/cost": self._cost, "/compact": self._compact, "/clear": self._clear,
            "/resume": self._resume, "/diff": self._diff, "/undo": self._undo,
            "/approvals": self._approvals,
        }  # fmt: skip
        if name in ("/quit", "/exit"):
            return False
        handler = handlers.get(name)
        if handler is None:
            self.console.print(f"unknown command {escape(name)}: /help lists the commands")
            return True
        try:
            await handler(argument)
        except UsageError as exc:
            self.console.print(f"[red]{escape(str(exc))}[/]")
        return True

    async def _help(self, _: str) -> None:
        for usage, what in COMMANDS.items():
            self.console.print(f"  [bold]{escape(usage):<18}[/] {what}")
        self.console.print("  @path attaches a file; !cmd runs a command; Ctrl-C stops a step")

    async def _model(self, name: str) -> None:
        if not name:
            self.console.print(f"model: {self.s.agent.model.id}")
            return
        from agentica.cli.code_session import settings_for

        model = self.new_model(name)
        old, self.s.agent.model = self.s.agent.model, model
        self.s.model = model
        self.s.agent.model_settings = settings_for(model, self.s.agent.model_settings.temperature)
        await old.aclose()
        self.console.print(f"model: {model.id}")

    async def _todos(self, _: str) -> None:
        items = self.s.agent.memory.state.get("todos") or []
        if not items:
            self.console.print("no todos")
        for item in items:
            mark = {"completed": "✓", "in_progress": "…"}.get(str(item.get("status")), " ")
            self.console.print(f"  [{mark}] {escape(str(item.get('content', '')))}")

    async def _cost(self, _: str) -> None:
        usage = self.s.agent.usage
        cost = "unknown" if usage.cost is None else f"${usage.cost:.4f}"
        self.console.print(
            f"{usage.requests} model calls · {usage.tool_calls} tool calls · "
            f"{usage.input_tokens:,} tokens in · {usage.output_tokens:,} out · cost {cost}"
        )
        runs = self.s.agent.memory.runs
        trace = runs[-1].trace if runs else None
        window = getattr(self.s.agent.model, "context_window", None)
        if trace is not None:
            sizes = [s.attributes.get("agentica.context_tokens") for s in trace.children]
            last = next((t for t in reversed(sizes) if isinstance(t, int)), None)
            if last is not None:
                share = f" of {window:,} ({last / window:.0%})" if window else ""
                self.console.print(f"context: {last:,} tokens{share} in the last request")

    async def _compact(self, _: str) -> None:
        agent = self.s.agent
        if not agent.memory.runs:
            self.console.print("nothing to compact yet")
            return
        summarize = model_summarizer(agent.model)
        text = transcript(agent.memory.messages)
        agent.memory.summary = await summarize(text, 600)
        self.compacted_at = len(agent.memory.runs)
        self.console.print(f"compacted {len(agent.memory.runs)} turns into a summary")

    async def _clear(self, _: str) -> None:
        self.s = await self.new_session(None, None)
        self.console.print(f"new conversation: {self.s.session_id}")

    async def _resume(self, session: str) -> None:
        if not session:
            sessions = await self.s.storage.list_sessions(self.s.agent.user_id, limit=20)
            for info in sessions:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated_at))
                self.console.print(f"  {info.session_id}  {when}  {escape(info.title)}")
            if not sessions:
                self.console.print("no stored sessions in this folder")
            return
        self.s = await self.new_session(session, None)
        self.console.print(f"resumed {session} ({len(self.s.agent.memory.runs)} turns)")

    async def _diff(self, _: str) -> None:
        diff = await self.s.checkpoints.diff()
        if not diff:
            self.console.print("no changes in this session")
            return
        self.console.print(Syntax(diff, "diff", theme="ansi_dark"))

    async def _undo(self, _: str) -> None:
        report = await self.s.checkpoints.undo()
        self.console.print(escape(str(report)))
        await self._save()

    async def _approvals(self, mode: str) -> None:
        if mode:
            self.s.mode.set_mode(mode)  # (UsageError for an unknown mode, before anything changes)
        if self.s.mode.mode == "full-auto" and self.s.sandbox == "none" and not self.sandbox_set:
            # commands that nobody looks at run in the sandbox: the shell is built again with it
            await self._save()
            self.s = await self.new_session(self.s.session_id, "auto")
            self.s.mode.set_mode("full-auto")
        self.console.print(f"approvals: {self.s.mode.mode}")
        if self.s.mode.mode == "full-auto":
            where = {"none": "[yellow]without a sandbox[/] (--sandbox none)"}.get(
                self.s.sandbox, "in the bubblewrap sandbox where it works, without network"
            )
            self.console.print(f"commands now run without asking, {where}")


async def exit_summary(setup: Any, console: Console) -> None:
    """What changed and how to come back."""
    changed = [p.lstrip("/") for p in setup.checkpoints.changed()]
    if changed:
        console.print(f"changed: {', '.join(changed)}", highlight=False)
    if await asyncio.to_thread((Path(setup.root) / ".git").exists):
        with contextlib.suppress(OSError):
            process = await asyncio.create_subprocess_exec(
                "git", "-C", str(setup.root), "diff", "--stat",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            stat, _ = await process.communicate()
            if stat.strip():
                console.print(stat.decode(errors="replace").rstrip(), markup=False)
    console.print(f"resume: agentica code {setup.root} --resume {setup.session_id}")
