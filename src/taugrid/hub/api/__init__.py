"""The hub's HTTP routes (``/v1``, FastAPI) and their authentication: thin wrappers over
the concern packages.
"""
