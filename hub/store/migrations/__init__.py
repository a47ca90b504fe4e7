"""Versioned schema migrations, NNNN_name.sql, applied in order at start by the store (db.py)."""
