"""Where the client commands find the hub and the admin token.

The hub URL: `--hub-url`, else $WINGSMITH_HUB_URL, else http://127.0.0.1:8080 (the hub's
default --http-listen).

The admin token, first found wins:
1. `--token TOKEN`;
2. `--token-file PATH` (for example the `<db>.admin-token` file the hub writes beside its
   database when WINGSMITH_ADMIN_TOKEN is not set);
3. $WINGSMITH_ADMIN_TOKEN (the variable the hub itself reads);
4. `wingsmith.db.admin-token` in the current directory: what a bare `wingsmith hub` started
   here writes, so the laptop quick start needs no token handling at all.

Pure apart from reading the token file; the environment and directory are passed in.
"""

from __future__ import annotations

import pathlib
import urllib.parse
from collections.abc import Mapping

from cli.errors import UsageError

ENV_HUB_URL = "WINGSMITH_HUB_URL"
ENV_ADMIN_TOKEN = "WINGSMITH_ADMIN_TOKEN"
DEFAULT_HUB_URL = "http://127.0.0.1:8080"
# The hub's default --db is "wingsmith.db"; its token file is "<db>.admin-token".
LOCAL_TOKEN_FILE = "wingsmith.db.admin-token"

TOKEN_HELP = (
    "no admin token: pass --token TOKEN or --token-file PATH (the hub writes "
    "<db>.admin-token beside its database), or set WINGSMITH_ADMIN_TOKEN"
)


def hub_url(flag: str | None, environ: Mapping[str, str]) -> str:
    url = (flag or environ.get(ENV_HUB_URL, "") or DEFAULT_HUB_URL).strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"invalid hub URL {url!r}: expected http://HOST:PORT (the hub's REST address)"
        )
    return url


def admin_token(
    *,
    flag: str | None,
    token_file: str | None,
    environ: Mapping[str, str],
    cwd: pathlib.Path,
) -> str:
    if flag and token_file:
        raise UsageError("give --token or --token-file, not both")
    if flag:
        return _nonempty(flag.strip(), "--token")
    if token_file:
        return _read(pathlib.Path(token_file), "--token-file")
    from_env = environ.get(ENV_ADMIN_TOKEN, "").strip()
    if from_env:
        return from_env
    local = cwd / LOCAL_TOKEN_FILE
    if local.is_file():
        return _read(local, str(local))
    raise UsageError(TOKEN_HELP)


def _read(path: pathlib.Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the admin token from {path} ({what}): {e}") from e
    return _nonempty(text.strip(), f"{what} {path}")


def _nonempty(token: str, what: str) -> str:
    if not token:
        raise UsageError(f"the admin token from {what} is empty")
    return token


ENV_RETRY_S = "WINGSMITH_RETRY_S"
DEFAULT_RETRY_S = 10.0


def retry_pauses(environ: Mapping[str, str]) -> tuple[float, ...]:
    """Pauses between retries of a call a hub could not answer (cli/client.py), within
    $WINGSMITH_RETRY_S seconds in all (default 10; 0: never retry)."""
    raw = environ.get(ENV_RETRY_S, "").strip()
    try:
        budget = float(raw) if raw else DEFAULT_RETRY_S
    except ValueError:
        raise UsageError(f"${ENV_RETRY_S} must be a number of seconds, got {raw!r}") from None
    pauses: list[float] = []
    for pause in (0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0):
        if sum(pauses) + pause > budget:
            break
        pauses.append(pause)
    return tuple(pauses)
