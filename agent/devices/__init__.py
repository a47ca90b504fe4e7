"""agent/devices."""
