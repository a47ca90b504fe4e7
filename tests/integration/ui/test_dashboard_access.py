"""Who may see the dashboard, over plain HTTP (no browser needed): nothing without a session,
the session cookie's flags, CSRF on every form, the CSP on every answer, no inline script or
style in any page, no open redirect after login."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from hub.ui.dashboard import CSP, SESSION_COOKIE
from tests.harness import ADMIN_TOKEN, Hub, SimAgent, wait_until
from tests.integration.test_rejects_and_paging import FOREIGN_DGD

PAGES = (
    "fleet",
    "workloads",
    "projects",
    "discovered",
    "deployments/x.east",
    "workloads/x",
    "workloads/x/delete",
    "clusters/x",
    "history/clusters/x",
    "no-such-page",
)
# The cockpit's forms (hub/ui/actions.py): refused without a session or a CSRF token.
ACTIONS = (
    "/ui/discovered/east.ml.x/track",
    "/ui/workloads/x/scale",
    "/ui/workloads/x/delete",
    "/ui/workloads/x/resume",
    "/ui/workloads/x/abort",
    "/ui/deployments/x.east/enabled",
    "/ui/clusters/east/cordon",
    "/ui/clusters/east/uncordon",
    "/ui/clusters/east/drain",
)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    set_cookies: list[str]
    body: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Client:
    """urllib with an optional cookie jar, never following redirects."""

    def __init__(self, hub: Hub) -> None:
        self.base = f"http://127.0.0.1:{hub.http_port}"
        self.jar = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            _NoRedirect(),
            urllib.request.HTTPCookieProcessor(self.jar),
        )

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None, **headers: str
    ) -> Answer:
        data = None if form is None else urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        for name, value in headers.items():
            request.add_header(name.replace("_", "-"), value)
        try:
            response = self._opener.open(request, timeout=10)
        except urllib.error.HTTPError as e:
            response = e
        body = response.read().decode()
        return Answer(
            response.status,
            {k.lower(): v for k, v in response.headers.items()},
            response.headers.get_all("Set-Cookie") or [],
            body,
        )

    def login(self) -> Answer:
        return self.request("POST", "/ui/login", {"token": ADMIN_TOKEN, "next": "/ui/fleet"})

    def csrf(self, path: str) -> str:
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', self.request("GET", path).body)
        assert match, "every page with a form carries its CSRF token"
        return match.group(1)


@pytest.mark.parametrize("page", PAGES)
def test_no_page_without_a_session(hub: Hub, page: str) -> None:
    answer = Client(hub).request("GET", f"/ui/{page}")
    assert answer.status == 303
    location = urllib.parse.urlsplit(answer.headers["location"])
    assert location.path == "/ui/login"
    assert urllib.parse.parse_qs(location.query) == {"next": [f"/ui/{page}"]}
    assert answer.headers["content-security-policy"] == CSP


def test_no_action_without_a_session_or_its_csrf_token(hub: Hub) -> None:
    for path in ACTIONS:
        answer = Client(hub).request("POST", path, {"csrf": "x"})
        assert answer.status == 401, path
    hub.register_cluster("east")
    client = Client(hub)
    client.login()
    for path in ACTIONS[1:]:
        assert client.request("POST", path, {"csrf": "0" * 64, "confirm": "yes"}).status == 403
    assert not hub.get("/v1/clusters/east")["cordoned"], "nothing done"


def test_login_sets_a_strict_httponly_session_cookie_and_never_the_token(hub: Hub) -> None:
    client = Client(hub)
    wrong = client.request("POST", "/ui/login", {"token": "wrong-token-of-some-length"})
    assert (
        wrong.status == 401 and "unknown or revoked token" in wrong.body and not wrong.set_cookies
    )
    answer = client.login()
    assert answer.status == 303 and answer.headers["location"] == "/ui/fleet"
    (cookie,) = answer.set_cookies
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    flags = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age"} <= flags
    assert "SameSite=Strict" in cookie and "Path=/ui" in cookie
    assert ADMIN_TOKEN not in cookie
    assert client.request("GET", "/ui/fleet").status == 200
    client.request("POST", "/ui/logout", {"csrf": client.csrf("/ui/fleet")})
    assert client.request("GET", "/ui/fleet").status == 303, "logged out"


def copied_cookie(client: Client) -> str:
    (cookie,) = list(client.jar)
    return f"{SESSION_COOKIE}={cookie.value}"


def test_logout_ends_the_session_so_a_copied_cookie_opens_nothing(hub: Hub) -> None:
    client = Client(hub)
    client.login()
    copy = copied_cookie(client)
    thief = Client(hub)
    assert thief.request("GET", "/ui/fleet", Cookie=copy).status == 200
    client.request("POST", "/ui/logout", {"csrf": client.csrf("/ui/fleet")})
    assert thief.request("GET", "/ui/fleet", Cookie=copy).status == 303
    assert thief.request("POST", "/ui/logout", {"csrf": "x"}, Cookie=copy).status == 401
    # Another session of the same token lives on: logout ends the session it is sent from.
    other = Client(hub)
    other.login()
    assert other.request("GET", "/ui/fleet").status == 200


def test_revoking_an_admin_scoped_token_ends_every_session_it_opened(hub: Hub) -> None:
    secret = hub.post("/v1/tokens", {"name": "ops", "role": "admin"})["secret"]
    copies = []
    for _ in range(2):
        client = Client(hub)
        answer = client.request("POST", "/ui/login", {"token": secret, "next": "/ui/fleet"})
        assert answer.status == 303
        copies.append(copied_cookie(client))
    admin = Client(hub)
    admin.login()
    assert all(Client(hub).request("GET", "/ui/fleet", Cookie=c).status == 200 for c in copies)
    hub.rest("DELETE", "/v1/tokens/ops")
    assert all(Client(hub).request("GET", "/ui/fleet", Cookie=c).status == 303 for c in copies)
    assert admin.request("GET", "/ui/fleet").status == 200, "other tokens' sessions stay"


def test_the_login_form_refuses_another_origin(hub: Hub) -> None:
    client = Client(hub)
    form = {"token": ADMIN_TOKEN, "next": "/ui/fleet"}
    evil = client.request("POST", "/ui/login", form, Origin="http://evil.example")
    assert evil.status == 403 and not evil.set_cookies
    assert client.request("POST", "/ui/login", form, Origin=client.base).status == 303


def test_a_tampered_or_foreign_cookie_is_no_session(hub: Hub) -> None:
    client = Client(hub)
    client.login()
    (cookie,) = list(client.jar)
    expiry, nonce, signature = str(cookie.value).split(".")
    for forged in (f"{int(expiry) + 10**6}.{nonce}.{signature}", f"{expiry}.{nonce}.{'0' * 64}"):
        other = Client(hub)
        answer = other.request("GET", "/ui/fleet", Cookie=f"{SESSION_COOKIE}={forged}")
        assert answer.status == 303


def test_every_form_needs_its_csrf_token_and_the_same_origin(
    hub: Hub, agents: Callable[..., SimAgent], tmp_path: object
) -> None:
    import pathlib

    import yaml

    seed = pathlib.Path(str(tmp_path)) / "seed.yaml"
    seed.write_text(yaml.safe_dump(FOREIGN_DGD))
    agents(cluster_id="east", token=hub.register_cluster("east"), seed_path=str(seed))
    wait_until(lambda: hub.get("/v1/discovered")["discovered"], what="discovered")
    client = Client(hub)
    client.login()
    path = "/ui/discovered/east.wingsmith.chat/track"

    assert client.request("POST", path, {}).status == 403
    assert client.request("POST", path, {"csrf": "0" * 64}).status == 403
    token = client.csrf("/ui/discovered")
    evil = client.request("POST", path, {"csrf": token}, Origin="http://evil.example")
    assert evil.status == 403
    assert hub.get("/v1/discovered/east.wingsmith.chat")["state"] == "new", "nothing done"
    done = client.request("POST", path, {"csrf": token}, Origin=client.base)
    assert done.status == 303
    assert hub.get("/v1/discovered/east.wingsmith.chat")["state"] == "tracked"


def test_every_answer_has_the_csp_and_no_page_has_inline_script_or_style(hub: Hub) -> None:
    client = Client(hub)
    login_page = client.request("GET", "/ui/login")
    client.login()
    pages = [login_page] + [client.request("GET", f"/ui/{page}") for page in PAGES]
    static = client.request("GET", "/ui/static/htmx.min.js")
    assert static.status == 200 and "htmx" in static.body
    for answer in [*pages, static]:
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
    for answer in pages:
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.body), "an inline script"
        assert not re.search(r"\sstyle=", answer.body), "an inline style"
        assert not re.search(r"\son[a-z]+=", answer.body), "an inline event handler"
    assert pages[-1].status == 404 and "not found" in pages[-1].body


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/ui/", "/v1/clusters", "javascript:x"]
)
def test_login_never_redirects_off_the_dashboard(hub: Hub, target: str) -> None:
    answer = Client(hub).request("POST", "/ui/login", {"token": ADMIN_TOKEN, "next": target})
    assert answer.headers["location"] == "/ui/fleet"


def test_ui_without_slash_goes_to_the_dashboard(hub: Hub) -> None:
    client = Client(hub)
    assert client.request("GET", "/ui").headers["location"] == "/ui/"
    assert client.request("GET", "/ui/").status == 303
