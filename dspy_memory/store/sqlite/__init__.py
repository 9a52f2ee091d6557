"""The SQLite backend (the default: one file)."""
