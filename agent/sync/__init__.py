"""agent/sync."""
