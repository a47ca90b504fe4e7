"""Versioned schema migrations, NNNN_name.sql, applied in order at start by hub/store/db.py."""
