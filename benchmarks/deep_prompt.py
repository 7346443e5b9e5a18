"""The fixed prompt cost of the deep-agent harness: ``uv run python benchmarks/deep_prompt.py``.

Counts the tokens of the first request an agent sends for a one-line task, as the embedded
model sees it (agentica's ChatML prompt: system prompt, tool instructions and schemas), with the
1.5B model's own tokenizer when its weights are present (else tiktoken's cl100k estimate).
Configurations: the demo's plain agent, ``DeepAgent`` with its defaults, a lean ``DeepAgent``
(no todos, no subagents), and a full one (background commands, web tools).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent  # noqa: E402
from agentica.cli.demo import INSTRUCTIONS, WorkspaceTools, calculator  # noqa: E402
from agentica.context.tokenizers import GGUFCounter, TiktokenCounter  # noqa: E402
from agentica.deep import DeepAgent  # noqa: E402
from agentica.messages import SystemMessage, UserMessage  # noqa: E402
from agentica.models.chat_template import render_chatml  # noqa: E402
from agentica.models.weights import cache_dir  # noqa: E402
from agentica.testing import ScriptedModel  # noqa: E402

TASK = "Summarise sales.csv in report.md."


def agents(root: Path) -> dict[str, Agent]:
    model = ScriptedModel([])
    return {
        "demo Agent": Agent(
            model=model, tools=[WorkspaceTools(root), calculator], instructions=INSTRUCTIONS
        ),
        "DeepAgent, lean": DeepAgent(model=model, workspace=root, todos=False, subagents=False),
        "DeepAgent, defaults": DeepAgent(model=model, workspace=root),
        "DeepAgent, full": DeepAgent(model=model, workspace=root, background_commands=True,
                                     web=True),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    gguf = cache_dir() / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    counter = GGUFCounter(str(gguf)) if gguf.is_file() else TiktokenCounter("cl100k_base")
    tokenizer = "Qwen2.5 (GGUF)" if gguf.is_file() else "cl100k_base (estimate)"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, agent in agents(Path(tmp)).items():
            tools = [f.definition for f in agent.functions.values()]
            system = agent.instructions if isinstance(agent.instructions, str) else ""
            messages = [SystemMessage(content=system), UserMessage(content=TASK)]
            total = counter.count_text(render_chatml(messages, tools))
            bare = counter.count_text(render_chatml(messages, ()))
            rows.append((name, len(tools), counter.count_text(system), total - bare, total))
    lines = [
        f"Tokenizer: {tokenizer}; first request for a one-line task, as the embedded model sees "
        "it (ChatML with tool instructions).",
        "",
        "| agent | tools | system prompt | tool instructions + schemas | whole first request |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {t} | {s} | {d} | {w} |" for n, t, s, d, w in rows]
    markdown = "\n".join(lines)
    print(markdown)
    if args.write_docs:
        path = ROOT / "docs" / "benchmarks.md"
        text = path.read_text()
        block = (
            "<!-- deep-prompt:start -->\n"
            "Command: `uv run python benchmarks/deep_prompt.py --write-docs` · measured "
            f"{time.strftime('%Y-%m-%d')}\n\n{markdown}\n<!-- deep-prompt:end -->"
        )
        if "<!-- deep-prompt:start -->" in text:
            text = re.sub(
                r"<!-- deep-prompt:start -->.*?<!-- deep-prompt:end -->", block, text, flags=re.S
            )
        else:
            text += "\n## Deep-agent harness: fixed prompt cost\n\n" + block + "\n"
        path.write_text(text)


if __name__ == "__main__":
    main()
