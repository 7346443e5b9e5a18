"""The HTTP API: one router module per resource, mounted by ``agentica_team.app``."""
