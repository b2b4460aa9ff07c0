"""The hub's state on SQLAlchemy (SQLite embedded, PostgreSQL for replicas): the schema,
its Alembic migrations, one repository module per concern (runs, clusters, tenancy,
data, deployments, usage, auth, leader lease), and the run's evidence record and
checkpoints.
"""
