"""The PostgreSQL backend (``continuity.store.postgres``) against a real server (pgserver): the
contract, derived tables, search, faults, processes. Through PgBouncer: ``tests/outside/pgbouncer``.
"""
