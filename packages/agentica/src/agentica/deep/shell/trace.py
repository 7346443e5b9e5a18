"""A failed check traced: what the code under test did, line by line, for the call a failing
``assertEqual`` made (``failed_check`` finds it in a test run's output, ``trace_command`` is
the command that runs it under a tracer in the workspace). A small model told "mean([2, 4, 6])
gives 3.33; the test expects 4" edits the return line; shown ``value = 4`` as the loop's first
value, it can see that 2 was skipped."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path, PurePosixPath

__all__ = ["MAX_TRACE_LINES", "failed_check", "trace_command"]

MAX_TRACE_LINES = 40

# the test's frame in a traceback, then its source line, then (further down) the failure
_FRAME = re.compile(r'(?m)^\s*File "([^"\n]+\.py)", line \d+, in (test\w*)\n\s*(\S[^\n]*)$')
_NOT_EQUAL = re.compile(r"(?m)^(?:E\s+)?AssertionError: .{1,200} != ")


def failed_check(output: str, root: Path) -> tuple[str, str] | None:
    """For a test run whose ``output`` shows a failed ``assertEqual(call(...), expected)``
    in a test file of the workspace ``root``: (the test module's dotted name, the call's
    source); else None. Blocking (it looks at the file system)."""
    failure = _NOT_EQUAL.search(output)
    if failure is None:
        return None
    frames = list(_FRAME.finditer(output[: failure.start()]))
    if not frames:
        return None
    path, source = frames[-1].group(1), frames[-1].group(3)
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if (
        not isinstance(node, ast.Call)
        or not isinstance(node.func, ast.Attribute)
        or node.func.attr != "assertEqual"
        or not node.args
        or not isinstance(node.args[0], ast.Call)
    ):
        return None
    module = _module(path, root)
    return None if module is None else (module, ast.unparse(node.args[0]))


def _module(path: str, root: Path) -> str | None:
    """The dotted module name of the test file ``path`` (as the traceback shows it: inside
    ``root``, or inside a sandbox that mounts it elsewhere) when it is a file of ``root``."""
    parts = PurePosixPath(path).parts
    top = root.resolve()
    for start in range(len(parts) - 1, 0, -1):  # the shortest tail that is a file of root
        relative = PurePosixPath(*parts[start:])
        candidate = (top / relative).resolve()
        if candidate.is_relative_to(top) and candidate.is_file():
            if not all(part.isidentifier() for part in relative.with_suffix("").parts):
                return None
            return ".".join(relative.with_suffix("").parts)
    return None


def trace_command(python: str, module: str, call: str) -> str:
    """The shell command that imports ``module`` (in the workspace, its working directory),
    evaluates ``call`` in its namespace under a tracer and prints what each line of the
    workspace's code (not the test's) did; the arguments are passed as ``argv``."""
    return "exec " + shlex.join([python, "-E", "-s", "-B", "-c", _TRACER, module, call])


_TRACER = f"""
import importlib, linecache, os, sys
root = os.getcwd()
sys.path.insert(0, root)
module = importlib.import_module(sys.argv[1])
skip = os.path.abspath(module.__file__)
out, frames, limit = [], {{}}, {MAX_TRACE_LINES}
def short(value):
    try:
        text = repr(value)
    except Exception:
        text = '?'
    return text if len(text) <= 60 else text[:57] + '...'
def emit(text):
    out.append(text)
def changed(frame, seen):
    found = []
    for name, value in list(frame.f_locals.items()):
        text = short(value)
        if seen.get(name) != text:
            seen[name] = text
            found.append(name + ' = ' + text)
    return found
def finish(frame, state, path, tail):
    seen, line = state
    if line is None:
        return
    effects = (changed(frame, seen) + tail)[-6:]
    text = linecache.getline(path, line).strip()[:120]
    emit('  line ' + str(line) + ': ' + text + ('    -> ' + ', '.join(effects) if effects else ''))
def tracer(frame, event, arg):
    if frame.f_code.co_filename.startswith('<'):
        return None
    path = os.path.abspath(frame.f_code.co_filename)
    if not path.startswith(root + os.sep) or path == skip or len(out) > limit:
        return None
    key = id(frame)
    if event == 'call':
        seen = {{}}
        given = changed(frame, seen)
        frames[key] = [seen, None]
        name = os.path.relpath(path, root)
        emit('call ' + frame.f_code.co_name + '(' + ', '.join(given) + ')  [' + name + ']')
        return tracer
    state = frames.setdefault(key, [{{}}, None])
    if event == 'line':
        finish(frame, state, path, [])
        state[1] = frame.f_lineno
    elif event == 'exception':
        finish(frame, state, path, ['raises ' + arg[0].__name__ + ': ' + short(str(arg[1]))])
        state[1] = None
    elif event == 'return':
        finish(frame, state, path, ['returns ' + short(arg)])
        frames.pop(key, None)
    return tracer
sys.settrace(tracer)
try:
    eval(sys.argv[2], vars(module))
except BaseException:
    pass
sys.settrace(None)
print('\\n'.join(out[:limit]))
if len(out) > limit:
    print('... (more steps)')
"""
