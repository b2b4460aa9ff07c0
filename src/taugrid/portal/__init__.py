"""The web portal: server-rendered pages under ``/ui`` for researchers and platform teams.

Top layer (beside the CLI): every page and action goes through ``taugrid.sdk`` to the
hub's HTTP API with the signed-in user's token, so the portal sees and may do exactly
what that token may with the CLI. The hub mounts it at start (``taugrid.portal.mount``
via the hub's extension hook). See docs/portal.md.
"""
