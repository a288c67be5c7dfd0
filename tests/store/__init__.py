"""The truth (``continuity.store``): stores and threads, the backend contract, artifacts,
locking, crashes and deletion under real processes, locations and the outage mark. The
PostgreSQL backend: ``postgres/``."""
