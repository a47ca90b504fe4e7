"""What the hub and the agent share besides the generated protos: the record <-> message
converter (common/convert.py) and the value types both sides hold alike (common/serving.py).

The hub and the agent never import each other (.importlinter); both may import this package,
and it imports neither of them (its own contract), only the generated protos and protobuf.
"""
