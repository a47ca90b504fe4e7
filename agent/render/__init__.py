"""Rendering: one deployment in, one DynamoGraphDeployment manifest out. Pure.

The reconciler calls `dgd.render_dgd(spec, namespace=..., images=..., nodes=...)` for every managed,
enabled deployment and hands the dict to `ClusterPort.apply_dgd`; a `errors.RenderError` it
turns into a Reject on the stream, leaving the last good DGD running.

Layers, higher imports lower: `dgd` (the manifest) -> `placement` (workers' node affinity),
`vllm`, `sglang`, `trtllm` (engine flags) -> `engine` (their shared shapes) -> `validation`,
`errors`. Outside this package it imports only `agent.model` (the values it renders), the
label constants and `Node` of `agent.cluster.port`, and the pure device-class functions of
`agent.devices` (classes, node_labels). It must not import kubernetes, grpc, protobuf or
anything that does I/O, and it reads no clock and no environment: same spec (and nodes),
same manifest, byte for byte.
docs/rendering.md says which field becomes which flag.
"""
