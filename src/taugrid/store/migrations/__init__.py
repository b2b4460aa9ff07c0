"""Alembic's environment for the hub's schema; ``versions/`` holds one migration per
schema change (a test checks that the migrated schema equals ``store/schema.py``).
"""
