"""The PostgreSQL + pgvector backend (extra `postgres`)."""
