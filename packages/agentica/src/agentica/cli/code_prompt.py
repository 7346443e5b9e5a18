"""The prompt of the interactive ``agentica code``: shown at once, while the agent loads.

``interactive`` shows the prompt (history, completion of slash commands and ``@files``,
Alt-Enter for a new line) before the agent stack is imported: the import and the session's setup
run in the background and the first task waits for them. Ctrl-C at an empty prompt twice,
Ctrl-D or /quit exits and prints the resume command. Only prompt_toolkit and rich are imported
here; the session itself is ``code_repl.Repl`` over ``code_session.setup``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console
from rich.markup import escape

from agentica._paths import data_dir
from agentica.errors import UsageError

__all__ = ["COMMANDS", "interactive"]

COMMANDS = {
    "/help": "this list",
    "/model NAME": "switch the model (a model string, or a model id on your server or gateway)",
    "/todos": "the agent's todo list",
    "/cost": "tokens, cost and context used in this session",
    "/compact": "summarise the conversation so far and keep only the summary",
    "/clear": "start a new conversation in this folder",
    "/resume [ID]": "list this folder's sessions, or switch to one",
    "/diff": "everything this session changed in the folder",
    "/undo": "restore the files the last turn changed",
    "/approvals [MODE]": "show or switch: read-only, ask, auto-edit, full-auto",
    "/quit": "exit (Ctrl-D does too)",
}


class _Completer(Completer):
    """Slash commands at the start of the line, files of the folder after ``@``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for usage in COMMANDS:
                name = usage.split()[0]
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text))
            return
        word = text.rsplit(" ", 1)[-1]
        if word.startswith("@"):
            yield from self._files(word)

    def _files(self, word: str) -> Iterator[Completion]:
        folder, _, prefix = word[1:].rpartition("/")
        try:
            entries = sorted(os.scandir(self.root / folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries[:200]:
            if entry.name.startswith(prefix) and not entry.name.startswith("."):
                path = f"{folder}/{entry.name}" if folder else entry.name
                suffix = "/" if entry.is_dir() else ""
                yield Completion(f"@{path}{suffix}", start_position=-len(word))


def _keys() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("escape", "enter")  # Alt-Enter: a new line in the task
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")  # with text: clear it; at an empty prompt: ask to exit
    def _clear(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


class _Session:
    """The agent side of the prompt: loaded in the background, awaited by the first command."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console
        self.repl: Any = None  # code_repl.Repl once loaded
        self.questions: PromptSession[str] = PromptSession()

    def mode(self) -> str:
        return str(self.repl.s.mode.mode) if self.repl else (self.args.approval or "ask")

    def status(self) -> str:
        if self.repl is None:
            return " loading the agent…"
        s = self.repl.s
        return f" model {s.agent.model.id} · session {s.session_id} · /help"

    async def load(self) -> Any:
        """Import the agent stack (in a thread), ask about the folder's trust, set up."""
        session_module, repl_module = await asyncio.to_thread(_import_stack)
        await self._ask_trust(session_module)
        s = await session_module.setup(self.args, "ask")
        args = self.args

        async def new_session(session_id: str | None, sandbox: str | None) -> Any:
            old = self.repl.s
            if sandbox:
                args.sandbox = sandbox  # (kept for later sessions of this process)
            fresh = argparse.Namespace(**{**vars(args), "resume": session_id,
                                          "resume_latest": False})  # fmt: skip
            made = await session_module.setup(fresh, "ask")
            made.mode.set_mode(old.mode.mode)
            await old.aclose()
            return made

        def new_model(name: str) -> Any:
            changed = argparse.Namespace(**{**vars(args), "model": name})
            return session_module.model_for(changed, self.repl.s.project)

        self.repl = repl_module.Repl(
            s, self.console, self.questions.prompt_async, new_model, new_session,
            sandbox_set=args.sandbox is not None,
        )  # fmt: skip
        return self.repl

    async def _ask_trust(self, session_module: ModuleType) -> None:
        """The project's MCP servers and model server are used only once the person trusts
        them (asked once)."""
        args = self.args
        if args.trust_mcp:
            return
        from agentica.deep import load_project

        root = await asyncio.to_thread(lambda: Path(args.folder).expanduser().resolve())
        project = await asyncio.to_thread(load_project, root)
        untrusted = await asyncio.to_thread(session_module.untrusted_servers, project)
        endpoint = not await asyncio.to_thread(session_module.project_endpoint_trusted, project)
        if not untrusted and not endpoint:
            return
        console = self.console
        console.print("This folder's .agentica/config.toml names what only you should allow:")
        if endpoint:
            console.print(f"  the model server {escape(str(project.settings.base_url))}")
        for server in untrusted:
            shown = " ".join(server.command) or str(server.url)
            console.print(f"  {escape(server.name)}: {escape(shown)}")
        answer = await self.questions.prompt_async("Trust them (now and in later sessions)? [y/N] ")
        args.trust_mcp = answer.strip().lower() in ("y", "yes")


def _import_stack() -> tuple[ModuleType, ModuleType]:
    return (
        importlib.import_module("agentica.cli.code_session"),
        importlib.import_module("agentica.cli.code_repl"),
    )


async def interactive(args: argparse.Namespace) -> int:
    """The interactive session: the prompt at once; the agent as soon as it has loaded."""
    console = Console(highlight=False)
    root = await asyncio.to_thread(lambda: Path(args.folder).expanduser().resolve())
    if not await asyncio.to_thread(root.is_dir):
        raise UsageError(f"{args.folder} is not a folder")
    session = _Session(args, console)
    # a question before the prompt (trust of the folder's config), or a stored session to find:
    # wait for the agent; else the prompt shows while it loads
    config = await asyncio.to_thread((root / ".agentica" / "config.toml").is_file)
    loading: asyncio.Task[Any] | None = None
    if config or args.resume or args.resume_latest:
        loading = asyncio.create_task(session.load())
        await loading
    history = data_dir() / "code_history"
    await asyncio.to_thread(history.parent.mkdir, parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)), completer=_Completer(root),
        complete_in_thread=True, key_bindings=_keys(), bottom_toolbar=session.status,
    )  # fmt: skip

    def start(_: Any) -> None:
        """Load once the prompt is on the screen (the import would slow its first drawing)."""
        nonlocal loading
        if loading is None:
            loading = asyncio.create_task(session.load())
            loading.add_done_callback(loaded)

    def ensure() -> asyncio.Task[Any]:
        start(None)
        assert loading is not None
        return loading

    def loaded(task: asyncio.Task[Any]) -> None:
        app = prompt.app
        error = None if task.cancelled() else task.exception()
        if error is not None and app.is_running:
            app.exit(exception=error)  # a failed setup ends the prompt with its error
        elif app.is_running:
            app.invalidate()  # the toolbar shows the model and session

    if loading is None:
        prompt.app.after_render += start
    console.print(f"agentica code in {root} · /help for commands")
    try:
        await _loop(session, ensure, prompt, console)
    finally:
        if loading is not None and not loading.done():
            await asyncio.wait([loading])
        if session.repl is not None:
            repl_module = importlib.import_module("agentica.cli.code_repl")
            await repl_module.exit_summary(session.repl.s, console)
            await session.repl.s.aclose()
    return 0


async def _loop(
    session: _Session,
    loading: Callable[[], asyncio.Task[Any]],
    prompt: PromptSession[str],
    console: Console,
) -> None:
    """Read and run lines until /quit, Ctrl-D, or Ctrl-C twice at an empty prompt."""
    interrupted = False
    while True:
        try:
            line = (await prompt.prompt_async(lambda: f"[{session.mode()}] > ")).strip()
        except KeyboardInterrupt:
            if interrupted:
                return
            interrupted = True
            console.print("[dim](Ctrl-C again to exit)[/]")
            continue
        except EOFError:
            return
        interrupted = False
        if not line:
            continue
        repl = await loading()  # (raises the setup's error, if it failed)
        if line.startswith("/"):
            if not await repl.command(line):
                return
        elif line.startswith("!"):
            await repl.shell(line[1:].strip())
        else:
            await repl.task(line)
