"""Dashboard sessions: signed cookies, their CSRF tokens, and the checks of a form's origin.

Logging in takes a token once (the admin token or a scoped API token); the answer is a session
cookie (HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS) holding an expiry, a nonce and
the principal's name ("admin", "token/<name>"), signed with a key derived from the admin
token, and recorded server-side (`SessionStore`: the nonce's hash, in the store). Logging out
deletes that record, so a copy of the cookie taken before opens nothing; revoking a scoped
token deletes its sessions; a new admin token ends every session (the key changes); no token
is ever in the cookie. Each form carries a CSRF token, an HMAC of the session nonce
(docs/dashboard.md "Logging in, and what protects it"). Used by hub/ui/dashboard.py's guard.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from hub import access

PREFIX = "/ui"
SESSION_COOKIE = "wingsmith_session"
SESSION_TTL_S = 12 * 3600


class Sessions:
    """Signed session cookies and their CSRF tokens; the key is derived from the admin token."""

    def __init__(self, admin_token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._key = hashlib.sha256(b"wingsmith-dashboard-session\0" + admin_token.encode()).digest()
        self._clock = clock

    def issue(self, actor: str) -> str:
        """A session of `actor` ("admin", "token/<name>"): its nonce names it. Its expiry:
        `expiry(cookie)`."""
        expiry = int(self._clock()) + SESSION_TTL_S
        body = f"{expiry}.{secrets.token_urlsafe(16)}~{actor}"
        return f"{body}.{self._sign(body)}"

    @staticmethod
    def actor(nonce: str) -> str:
        return nonce.partition("~")[2]

    @staticmethod
    def expiry(cookie: str) -> float:
        return float(cookie.partition(".")[0])

    def nonce(self, cookie: str | None) -> str | None:
        """The session's nonce when the cookie is ours and unexpired, else None."""
        if not cookie or cookie.count(".") != 2:
            return None
        expiry, nonce, signature = cookie.split(".")
        if not hmac.compare_digest(signature, self._sign(f"{expiry}.{nonce}")):
            return None
        if not expiry.isdigit() or int(expiry) < self._clock():
            return None
        return nonce

    def csrf(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class SessionStore:
    """The server-side record of sessions (hub/service/access.py), by the cookie's nonce."""

    # (nonce, actor, expiry): at login.
    open: Callable[[str, str, float], None]
    # nonce -> its principal now; None once the session ended or its token was revoked.
    principal_of: Callable[[str], access.Principal | None]
    # nonce: at logout.
    end: Callable[[str], None]


def check_origin(request: web.Request) -> None:
    """403 for a POST whose Origin is another site (a browser always sends one on a
    cross-site POST; `null` comes from privacy-preserving contexts and file pages)."""
    origin = request.headers.get("Origin")
    if origin and origin != "null" and urllib.parse.urlsplit(origin).netloc != request.host:
        raise web.HTTPForbidden(text="cross-site request refused")


def safe_next(request: web.Request, given: str = "") -> str:
    """Where to go after logging in: a path under /ui only (never another site)."""
    target = given or request.query.get("next", "")
    parsed = urllib.parse.urlsplit(target)
    if parsed.scheme or parsed.netloc or not target.startswith(f"{PREFIX}/"):
        return f"{PREFIX}/fleet"
    return target
