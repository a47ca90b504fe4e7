"""`wingsmith`: argument parsing and dispatch (entry point `cli.main:main`).

`hub`, `agent` and `demo` launch other programs: everything after the word goes, unparsed, to
`hub.app.main`, `agent.main.main` or `cli.demo.main`, imported only then, so that a client
command never loads the hub or the agent. Every other command is a REST client: its
arguments are checked first (a usage error never needs a hub; each command's arguments are
defined in cli/args/, by role), then the hub URL and token are resolved (cli/config.py), then
the action its arguments prepared runs (cli/commands.py and its neighbours).

Exit status: 0 done; 1 the hub refused, could not be reached, or a file was unusable;
2 a usage error (argparse's convention), a missing token included; 141 the reader of stdout
went away (`wingsmith get ... | head`), as a Unix tool killed by SIGPIPE reports it, silently.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import pathlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import shtab

from cli import commands, config, jsonpath, kinds, output
from cli.args import Action, changes, operations, output_format, reads
from cli.client import HubClient
from cli.errors import CliError, UsageError

if TYPE_CHECKING:
    from cli.args import Subparsers

# word -> (module, help). The module's main(argv) runs the program.
LAUNCHERS = {
    "hub": ("hub.app", "run the hub (the control plane); see `wingsmith hub --help`"),
    # agent.main, not agent.app: it is what `python -m agent` runs (agent/__main__.py).
    "agent": ("agent.main", "run a cluster agent (hangar); see `wingsmith agent --help`"),
    "demo": ("cli.demo", "run a local demo: a hub and simulated clusters"),
}

# 128 + SIGPIPE: what a shell reports for `cat big | head` and every Unix tool in its place.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _run(argv)
        finally:
            # Flushed here, not at interpreter exit, so a reader that went away is seen below
            # whether the output filled the buffer or not (argparse's --help exits by SystemExit).
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader closed the pipe: nobody reads what is left, so stop without a word (a
        # traceback would land on the terminal, the only place still listening).
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered
    does not fail again ("Exception ignored ... BrokenPipeError") at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _run(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in LAUNCHERS:
        # Before argparse: the launched program parses its own options (and its own --help).
        return launch(words[0], words[1:])
    parser = build_parser()
    args = parser.parse_args(words)
    if args.command in LAUNCHERS:
        return launch(args.command, args.args)
    if args.command == "completion":
        # Needs no hub and no token: it only describes this parser.
        print(shtab.complete(parser, shell=args.shell))
        return 0
    sub: argparse.ArgumentParser = args.parser
    try:
        action: Action = args.prepare(args)
        action(_context(args))
    except UsageError as e:
        sub.print_usage(sys.stderr)
        print(f"{sub.prog}: error: {e.message}", file=sys.stderr)
        return e.exit_code
    except jsonpath.MissingField as e:
        # kubectl's rule: a path to a field that does not exist is an error, not "".
        print(f"error: {e}", file=sys.stderr)
        return 1
    except CliError as e:
        print(f"error: {e.message}", file=sys.stderr)
        if e.hint:
            print(e.hint, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


def launch(word: str, argv: list[str]) -> int:
    module = importlib.import_module(LAUNCHERS[word][0])
    module.main(argv)
    return 0


def _context(args: argparse.Namespace) -> commands.Context:
    url = config.hub_url(args.hub_url, os.environ)
    try:
        token = config.admin_token(
            flag=args.token, token_file=args.token_file, environ=os.environ, cwd=pathlib.Path.cwd()
        )
    except UsageError:
        if getattr(args, "needs_token", True):
            raise
        token = ""  # explain reads the API document, which the hub serves to anyone
    return commands.Context(
        client=HubClient(url, token, retry_pauses_s=config.retry_pauses(os.environ)),
        output=args.output or "table",
        out=sys.stdout,
        err=sys.stderr,
        headers=not getattr(args, "no_headers", False),
        sort_by=getattr(args, "sort_by", None) or "",
    )


# -- the parser -------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with "did you mean" on a mistyped choice: a kind (`get workoads`), a
    command (`wingsmith dscribe`), an action (`rollout stauts`)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        hint = kinds.suggest(str(value), [str(c) for c in choices])
        shown = ", ".join(map(repr, choices))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{hint} (choose from {shown})"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="wingsmith",
        description="Wingsmith: GPU model serving across Kubernetes clusters.",
        epilog="Client options may come before or after the command. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _add_client_options(parser, default=None)
    # cast: at runtime the subparsers are _Parser too (argparse uses type(self)).
    sub = cast(
        "Subparsers", parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    )
    for word, (_, help_text) in LAUNCHERS.items():
        launcher = sub.add_parser(word, help=help_text, add_help=False)
        launcher.add_argument("args", nargs=argparse.REMAINDER)
    client = _Parser(add_help=False)
    # SUPPRESS: an option given before the command is not reset by the subcommand's default.
    _add_client_options(client, default=argparse.SUPPRESS)
    for add in (
        reads.add_get,
        reads.add_describe,
        changes.add_create,
        changes.add_apply,
        changes.add_scale,
        changes.add_set_priority,
        changes.add_set_quota,
        changes.add_enable,
        changes.add_delete,
        changes.add_label,
        operations.add_rotate_token,
        operations.add_maintenance,
        operations.add_discovered,
        operations.add_rollout,
        operations.add_authority,
        operations.add_tokens,
        reads.add_audit,
        reads.add_explain,
    ):
        add(sub, client)
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script: `source <(wingsmith completion bash)`, or for "
        "zsh write it as _wingsmith on $fpath.",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    return parser


def _add_client_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    group = parser.add_argument_group("hub connection and output")
    group.add_argument(
        "--hub-url",
        default=default,
        metavar="URL",
        help=f"the hub's REST address (default: ${config.ENV_HUB_URL}, "
        f"else {config.DEFAULT_HUB_URL})",
    )
    group.add_argument(
        "--token",
        default=default,
        metavar="TOKEN",
        help=f"the admin token or a scoped token (default: ${config.ENV_ADMIN_TOKEN}, else "
        f"./{config.LOCAL_TOKEN_FILE})",
    )
    group.add_argument(
        "--token-file",
        default=default,
        metavar="PATH",
        help="read the admin token from a file, e.g. the hub's <db>.admin-token",
    )
    group.add_argument(
        "-o",
        "--output",
        default=default,
        type=output_format,
        metavar="FORMAT",
        help=f"{'|'.join(output.FORMATS)}|jsonpath=TEMPLATE|custom-columns=NAME:.path,..."
        " (default: table)",
    )
    group.add_argument(
        "--no-headers",
        action="store_true",
        default=default if default is argparse.SUPPRESS else False,
        help="tables without their header row",
    )


def _version() -> str:
    try:
        return importlib.metadata.version("wingsmith")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
