"""The hub schema's migrations, in order (``0001_initial_schema`` onwards)."""
