"""The dashboard served by the hub at /ui/ (hub/ui/dashboard.py)."""
