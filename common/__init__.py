"""What the hub and the agent share besides the generated protos: the record <-> message
converter (common/convert.py), the value types both sides hold alike (common/serving.py), the
JSON log lines with their trace ids (common/logformat.py) and the command-line flags both
commands take alike, with their usage error (common/flags.py).

The hub and the agent never import each other (.importlinter); both may import this package,
and it imports neither of them (its own contract), only the generated protos,
protobuf and OpenTelemetry's API.
"""
