"""The CLI's error tree. `cli.main` prints `error: <message>` and exits with `exit_code`.

    CliError                                   exit 1
    +-- UsageError(message)                    exit 2   bad arguments, no token, bad --hub-url
    +-- ManifestError(source, index, problem)  exit 1   a `create -f` file we cannot use
    +-- HubUnreachable(url, reason)            exit 1   no HTTP answer at all
    +-- ApiError(status, code, message)        exit 1   the hub answered with an error
        +-- PromotionRefused(deployment, ...)  exit 1   409 to `authority promote`

Nothing here is raised past `cli.main`: a traceback is a bug, not an error report. An error
with a `hint` gets it printed on the lines after its message.
"""

from __future__ import annotations


class CliError(Exception):
    """Base of every error the CLI reports to its user."""

    exit_code = 1
    # What to do next, printed after the message; "" for none.
    hint = ""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """The command line cannot be run as given (argparse's own errors also exit 2)."""

    exit_code = 2


class ManifestError(CliError):
    """A `create -f` file that does not parse or holds a document we cannot create.

    `index` is the 1-based position of the document in the file; 0 when the file as a whole
    is at fault (unreadable, not YAML, empty).
    """

    def __init__(self, source: str, index: int, problem: str) -> None:
        where = f"{source}: document {index}" if index else source
        super().__init__(f"{where}: {problem}")
        self.source = source
        self.index = index
        self.problem = problem


class HubUnreachable(CliError):
    """No HTTP answer: connection refused, DNS failure, timeout, reset."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f"cannot reach the hub at {url} ({reason}). Is the hub running "
            "(`wingsmith hub`)? Point at its REST address with --hub-url or WINGSMITH_HUB_URL."
        )
        self.url = url
        self.reason = reason


class ApiError(CliError):
    """The hub's error answer: `status` is the HTTP status (404), `code` the gRPC code name
    from the body (`NOT_FOUND`), `message` the hub's message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.api_message = message


class PromotionRefused(ApiError):
    """The hub refused to promote `deployment` to managed (409 FAILED_PRECONDITION).

    Its message lists what differs, or why there is nothing to compare yet; the hint points
    at the review, which shows the whole picture, and at the flag that accepts differences.
    """

    def __init__(self, *, deployment: str, status: int, code: str, message: str) -> None:
        super().__init__(status, code, message)
        self.deployment = deployment
        self.hint = (
            f"hint: `wingsmith authority review {deployment}` shows what differs. Change the\n"
            "      workload to match the cluster, or promote with --accept-differences to apply\n"
            "      the declaration (pods whose template changes restart)."
        )
