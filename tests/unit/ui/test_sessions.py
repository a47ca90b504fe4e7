"""The dashboard's session cookies and CSRF tokens, and its bar arithmetic."""

from __future__ import annotations

from hub.ui.sessions import SESSION_TTL_S, Sessions
from hub.ui.templating import bar, digest_bar

TOKEN = "admin-token-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_lives_its_ttl_and_not_a_second_more() -> None:
    clock = Clock()
    sessions = Sessions(TOKEN, clock=clock)
    cookie = sessions.issue("admin")
    nonce = sessions.nonce(cookie)
    assert nonce is not None and nonce in cookie
    clock.now += SESSION_TTL_S
    assert sessions.nonce(cookie) == nonce
    clock.now += 1
    assert sessions.nonce(cookie) is None


def test_a_cookie_of_another_admin_token_or_tampered_is_no_session() -> None:
    cookie = Sessions(TOKEN).issue("admin")
    assert Sessions("another-token-0123456789").nonce(cookie) is None
    expiry, nonce, signature = cookie.split(".")
    for forged in (
        f"{int(expiry) + 1}.{nonce}.{signature}",
        f"{expiry}.x{nonce}.{signature}",
        # The last character changed (to another one: a signature may end in "0" already).
        f"{expiry}.{nonce}.{signature[:-1]}{'1' if signature.endswith('0') else '0'}",
        "",
        "a.b",
        f"{expiry}.{nonce}.{signature}.extra",
    ):
        assert Sessions(TOKEN).nonce(forged) is None


def test_csrf_tokens_differ_per_session_and_per_admin_token() -> None:
    sessions = Sessions(TOKEN)
    a, b = sessions.nonce(sessions.issue("admin")), sessions.nonce(sessions.issue("admin"))
    assert a and b and sessions.csrf(a) != sessions.csrf(b)
    assert Sessions("another-token-0123456789").csrf(a) != sessions.csrf(a)


def test_bars_are_fractions_of_the_total_laid_end_to_end() -> None:
    segments = bar({"allocated": 4, "reserved": 2, "free": 10, "unusable": 0}, 16)
    assert [(s["x"], s["width"]) for s in segments] == [
        (0.0, 25.0),
        (25.0, 12.5),
        (37.5, 62.5),
        (100.0, 0.0),
    ]
    assert all(s["width"] == 0 for s in bar({"used": 3}, 0)), "no total: an empty bar"


def test_the_digest_bar_puts_the_target_first() -> None:
    segments = digest_bar({"svg_old": 1, "svg_new": 3}, "svg_new")
    assert [(s["name"], s["target"], s["width"]) for s in segments] == [
        ("svg_new", True, 75.0),
        ("svg_old", False, 25.0),
    ]
