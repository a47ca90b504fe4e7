"""The command-line flags the hub (hub/app/command.py) and the agent (agent/main.py) share:
`--log-level`, `--log-format` and `--otlp-endpoint`, their checks, and the usage error both
commands refuse bad flags with (exit status 2, `error: <flag>: <problem>`, no traceback).

Each side adds its own flags and checks around these; tracing itself stays each side's own
(hub/tracing.py, agent/tracing.py), passed in as the function that turns it on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from common import logformat

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The environment variable the OpenTelemetry SDKs read, honoured as --otlp-endpoint's default.
ENV_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"

T = TypeVar("T")


class UsageError(Exception):
    """A flag (or the environment) is wrong: said before anything starts, exit status 2.
    `flag` empty: the problem concerns several flags and names them itself."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(f"{flag}: {problem}" if flag else problem)


def add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """`--log-level`, `--log-format` and `--otlp-endpoint` (default: the environment's)."""
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)"
    )
    parser.add_argument(
        "--log-format",
        choices=logformat.FORMATS,
        default="text",
        help="text lines, or JSON objects with the trace and span ids (default: %(default)s)",
    )
    parser.add_argument(
        "--otlp-endpoint",
        default=os.environ.get(ENV_OTLP_ENDPOINT, ""),
        help="send traces to this OpenTelemetry collector (OTLP/gRPC), e.g. http://otel:4317;"
        f" default ${ENV_OTLP_ENDPOINT}, else tracing is off",
    )


def check_logging_flags(args: argparse.Namespace) -> None:
    """Refuse a log level or an OTLP endpoint nobody could use (UsageError)."""
    if args.log_level.upper() not in LOG_LEVELS:
        raise UsageError("--log-level", f"expected one of {', '.join(LOG_LEVELS)}")
    if args.otlp_endpoint and not args.otlp_endpoint.startswith(("http://", "https://")):
        raise UsageError(
            "--otlp-endpoint",
            f"expected http://HOST:PORT or https://HOST:PORT, got {args.otlp_endpoint!r}",
        )


def checked(check: Callable[[argparse.Namespace], T], args: argparse.Namespace) -> T:
    """`check(args)`'s result; a UsageError it raises becomes `error: ...` on stderr and exit
    status 2, before anything starts."""
    try:
        return check(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def start_logging(args: argparse.Namespace, configure_tracing: Callable[[str], None]) -> None:
    """Logging as the flags ask, and tracing through `configure_tracing` when an endpoint is
    given (checked by check_logging_flags)."""
    logformat.configure(args.log_level, args.log_format)
    if args.otlp_endpoint:
        configure_tracing(args.otlp_endpoint)
