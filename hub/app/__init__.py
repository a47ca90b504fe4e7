"""The hub process: `server` wires every part of the hub (store, service context, sync
pieces) and runs it, `listeners` builds its gRPC and HTTP servers, `chores` holds its periodic
tasks, and `command` is its command line. The only package that knows every part of the hub.

Its entry points are named here: `main` is `wingsmith hub` and `python -m hub`; `HubServer`
and `HubConfig` run a hub in-process (the demo, the tests)."""

from hub.app.command import main
from hub.app.server import HubConfig, HubServer, split_address

__all__ = ["HubConfig", "HubServer", "main", "split_address"]
