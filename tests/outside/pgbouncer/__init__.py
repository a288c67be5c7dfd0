"""The PostgreSQL store through a real PgBouncer in transaction pooling mode."""
