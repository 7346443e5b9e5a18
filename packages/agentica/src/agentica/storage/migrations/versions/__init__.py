"""Schema revisions of ``SQLStorage``, oldest first (``0001`` creates the schema)."""
