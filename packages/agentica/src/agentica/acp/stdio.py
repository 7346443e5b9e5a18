"""Serving ACP on this process's stdin and stdout, which carry nothing else.

The protocol gets private copies of file descriptors 0 and 1; meanwhile fd 0 reads the null
device and fd 1 writes to stderr, so a stray ``print``, a library's output or a child process
cannot corrupt a message (one byte glued to a message makes the editor wait forever).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

__all__ = ["serve_stdio"]

_LIMIT = 50 * 1024 * 1024


async def serve_stdio(agent: Any) -> None:
    """Run the ACP agent side for ``agent`` until the editor closes stdin."""
    import acp

    loop = asyncio.get_running_loop()
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), wire_in)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, wire_out)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    try:
        await acp.run_agent(agent, writer, reader)  # (the SDK names the writer input_stream)
    finally:
        writer.close()
