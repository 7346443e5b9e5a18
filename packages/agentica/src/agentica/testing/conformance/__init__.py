"""Conformance suites for implementations of the protocols a user can plug in.

- ``files``: checks for a ``FileBackend`` (``agentica.tools.files``)
- ``commands``: checks for a ``CommandBackend`` (``agentica.tools.commands``)
- ``knowledge``: checks for a ``KnowledgeStore`` (``agentica.knowledge``), imported from
  ``agentica.testing.conformance.knowledge`` (it needs the ``knowledge`` extra's modules only
  for the stores themselves)
"""

from agentica.testing.conformance.commands import (
    COMMAND_BACKEND_CHECKS,
    SECRET_VARIABLE,
    CommandBackendCase,
    CommandBackendCheck,
    CommandBackendFactory,
    check_command_backend,
)
from agentica.testing.conformance.files import (
    FILE_BACKEND_CHECKS,
    OUTSIDE_TEXT,
    FileBackendCase,
    FileBackendCheck,
    FileBackendFactory,
    NotApplicable,
    Symlinks,
    check_file_backend,
)

__all__ = [
    "COMMAND_BACKEND_CHECKS",
    "FILE_BACKEND_CHECKS",
    "OUTSIDE_TEXT",
    "SECRET_VARIABLE",
    "CommandBackendCase",
    "CommandBackendCheck",
    "CommandBackendFactory",
    "FileBackendCase",
    "FileBackendCheck",
    "FileBackendFactory",
    "NotApplicable",
    "Symlinks",
    "check_command_backend",
    "check_file_backend",
]
