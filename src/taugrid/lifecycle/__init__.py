"""A run's lifecycle as pure data and rules: run and attempt states, the nine phases and
how signals move them, failure classes, and the table of known failure shapes that
turns Ray's and Kubernetes' messages into one line a person reads.
"""
