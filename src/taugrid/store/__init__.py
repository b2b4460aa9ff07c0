"""The hub's state on SQLAlchemy (SQLite embedded, PostgreSQL for replicas): the schema,
its Alembic migrations and one repository module per concern (runs, clusters, tenancy,
data, deployments, usage, auth, leader lease). The run's record is ``taugrid.record``.
"""
