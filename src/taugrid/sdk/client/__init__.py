"""The user's side of a hub: the HTTP client and its calls per concern, named contexts,
submission preparation (tau.yaml, code archive, provenance) and pipeline plans.
"""
