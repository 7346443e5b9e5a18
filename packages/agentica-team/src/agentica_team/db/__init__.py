"""The service database: tables (``schema``), connections and upgrades (``engine``)."""

from agentica_team.db.engine import Database

__all__ = ["Database"]
