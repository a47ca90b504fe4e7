"""agent/render."""
