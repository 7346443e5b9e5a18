"""Tools used by the CLI tests (loaded with --tool tests.cli_tools:add)."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
