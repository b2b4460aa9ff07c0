"""Workspaces, members, quotas and quota requests, and what runs cost."""
