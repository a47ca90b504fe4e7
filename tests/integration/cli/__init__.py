"""The CLI against a real hub in-process (and once as a real subprocess)."""
