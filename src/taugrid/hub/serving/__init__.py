"""Serving deployments (``tau serve``) and the hub's endpoint that routes to them."""
