"""The hub's edges to callers: the control gRPC servicer and the REST gateway.

Both serve the same use cases of hub.service: the gRPC servicer calls them directly, the REST
gateway (rest.py) transcodes HTTP/JSON to the same protobuf requests from the proto's
google.api.http rules and hands them to the same handlers, so nothing is written twice.
Protobuf messages are converted to and from domain values here, at the edge, and never passed
into the core; jsonmap.py (writing) and jsonread.py (reading) are the one REST JSON mapping of
any message. contract.py holds the input rules the hub enforces and the OpenAPI document
(openapi.py) states.

Must not import: sqlite3 or hub.store (read and write through hub.service), the agent.
"""
