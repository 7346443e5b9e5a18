"""Conformance suites for implementations of the protocols a user can plug in.

- ``files``: checks for a ``FileBackend`` (``agentica.tools.files``)
"""

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
    "FILE_BACKEND_CHECKS",
    "OUTSIDE_TEXT",
    "FileBackendCase",
    "FileBackendCheck",
    "FileBackendFactory",
    "NotApplicable",
    "Symlinks",
    "check_file_backend",
]
