"""The Wingsmith hub: the control plane.

Layers, higher ones importing lower ones only (import-linter checks it, see .importlinter):

    app        wiring; the only module that knows everything
    api, sync  the edges: control gRPC + REST gateway; the agent stream. protobuf <-> domain
    service    use cases: read a view, decide, commit, then publish
    admission, placement, phases, serving   pure decisions over hub.model values
    store      SQLite or PostgreSQL behind one seam; the only package that imports sqlite3/psycopg
    model, errors

The hub never imports the agent; they share only the generated protos (package wingsmith).
"""

__version__ = "0.1.0"
