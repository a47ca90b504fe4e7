"""The fleet benchmark: how far one hub goes on this machine (docs/benchmark.md).

`python -m bench` starts a hub process, spreads simulated cluster agents (the product's own
agent on a simulated cluster) over worker processes, measures connect, fan-out, ingest,
admission, restart and memory, then measures the bare building blocks (grpc.aio streams,
SQLite upserts, the pure admission decision) on the same machine and prints each hub figure
beside its limit.

Modules: hubproc (the hub process, its control API, /metrics and a read-only view of its
database), workers (load-generator processes), scenarios (the phases of one size), baselines
(the bare limits), figures (what is printed, beside which baseline and target), report
(table and JSON).
"""
