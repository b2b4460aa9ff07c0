"""Interactive sessions (``tau dev``): the session runs (``sessions``) and the hub's door to
their JupyterLab (``proxy``)."""
