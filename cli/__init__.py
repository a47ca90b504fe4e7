"""The user-facing command line: `wingsmith` (entry point `cli.main:main`, `python -m cli`).

Role: let an operator run the hub and the agent, and drive the hub's control API: list and read
resources, create them from files, scale, set quotas, enable or disable deployments, delete;
decide about discovered workloads (track, ignore, promote) and review, promote or demote a
deployment's authority.

Import rules:
- This is the only package allowed to import both `hub` and `agent`, and only to launch them
  (`wingsmith hub ...`, `wingsmith agent ...`), lazily, in `cli/main.py`.
- Client commands talk to the hub over its REST API only (`cli/client.py`, stdlib urllib):
  they never import `hub`, `agent` or the generated protobuf code, so the CLI is a client like
  any other and sees exactly what the API shows.

Layers, higher to lower (a module imports only modules below it):
    main       argparse and dispatch
    commands   one function per command
    manifests  reading `create -f` files         review   `authority review` drawn for people
                                                 output   tables, JSON, YAML
    client     the REST client                   config   where the hub URL and token come from
    kinds      the resource kinds                errors   the package's error tree
"""
