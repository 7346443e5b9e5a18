"""agentica_team: the centralized team agent service (``agentica serve``).

This package depends on ``agentica`` and never the reverse. Its runtime (accounts, budgets,
executors, audit, web UI) arrives with the team-service issue; for now it only marks the
distribution boundary so the import-layer contract can be enforced from the start.
"""

__all__: list[str] = []
