"""Fixtures shared by the team service's tests.

- ``pg_cluster``: one throw-away PostgreSQL cluster for the whole session (skips with the reason
  when PostgreSQL is not installed); tests create their own databases in it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import Cluster, throwaway_cluster, why_no_postgres


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    reason = why_no_postgres()
    if reason:
        pytest.skip(reason)
    with throwaway_cluster() as cluster:
        yield cluster
