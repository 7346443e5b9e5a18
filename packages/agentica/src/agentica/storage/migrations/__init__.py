"""Alembic migrations of the ``SQLStorage`` schema (``env.py`` and ``versions/``).

``SQLStorage`` runs ``upgrade head`` itself on first use (``create=True``); see ``env.py`` for the
command line.
"""
