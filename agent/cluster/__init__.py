"""agent/cluster."""
