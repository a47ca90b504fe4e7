"""Labels on workloads and projects: Kubernetes' label rules and its equality-based selectors
(hub/service/validate.py, hub/service/selectors.py), table-driven."""

from __future__ import annotations

import pytest

from hub import errors
from hub.model import Placement, Workload
from hub.service import projects, selectors, validate, workloads
from hub.service.context import ServiceContext
from hub.store import workloads as workloads_store
from hub.store.port import open_store
from tests.records import CONFIG

LABELS = {"team": "a", "tier": "gold", "example.com/owner": "ops", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("team=a", True),
        ("team==a", True),
        ("team=b", False),
        ("team!=b", True),
        ("team!=a", False),
        ("absent!=x", True),  # kubectl: != also holds where the key is absent
        ("team", True),
        ("absent", False),
        ("!absent", True),
        ("!team", False),
        ("empty=", True),
        ("empty", True),
        ("example.com/owner=ops", True),
        ("team=a,tier=gold", True),
        ("team=a,tier=silver", False),
        (" team = a , !absent ", True),
    ],
)
def test_a_selector_matches_as_kubectls_does(selector: str, matches: bool) -> None:
    assert selectors.parse(selector).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "problem"),
    [
        ("team=a,", "empty requirement"),
        (",team", "empty requirement"),
        ("team in (a,b)", "only equality-based"),
        ("team notin (a)", "only equality-based"),
        ("=a", "is not a label key"),
        ("-team=a", "is not a label key"),
        ("team=a b", "is not a label value"),
        ("team=" + "v" * 64, "is not a label value"),
        ("!", "is not a label key"),
        ("Bad_Prefix/x=1", "is not a label key"),
    ],
)
def test_a_bad_selector_is_invalid_argument_naming_the_parameter(
    selector: str, problem: str
) -> None:
    with pytest.raises(errors.InvalidArgument) as raised:
        selectors.parse(selector)
    assert raised.value.field == "label_selector"
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    "labels",
    [
        {},
        {"a": ""},
        {"a": "b"},
        {"A.b_c-d": "X.y_z-9"},
        {"n" * 63: "v" * 63},
        {"example.com/name": "v"},
        {("s" * 63 + ".") * 3 + "s" * 61 + "/n": "v"},  # a 253-character prefix
        {f"k{i}": "v" for i in range(validate.MAX_LABELS)},
    ],
)
def test_valid_labels_pass_unchanged(labels: dict[str, str]) -> None:
    assert validate.labels(labels, "workload.labels") == labels


@pytest.mark.parametrize(
    ("labels", "field", "problem"),
    [
        ({"": "v"}, "workload.labels.", "invalid label key"),
        ({"n" * 64: "v"}, "workload.labels." + "n" * 64, "invalid label key"),
        ({"-a": "v"}, "workload.labels.-a", "invalid label key"),
        ({"a-": "v"}, "workload.labels.a-", "invalid label key"),
        ({"a b": "v"}, "workload.labels.a b", "invalid label key"),
        ({"UPPER.com/a": "v"}, "workload.labels.UPPER.com/a", "invalid label key"),
        ({"/a": "v"}, "workload.labels./a", "invalid label key"),
        ({"p/": "v"}, "workload.labels.p/", "invalid label key"),
        ({"a/b/c": "v"}, "workload.labels.a/b/c", "invalid label key"),
        ({"s" * 254 + "/n": "v"}, "workload.labels." + "s" * 254 + "/n", "invalid label key"),
        ({"a": "v" * 64}, "workload.labels.a", "invalid label value"),
        ({"a": "-v"}, "workload.labels.a", "invalid label value"),
        ({"a": "v v"}, "workload.labels.a", "invalid label value"),
        ({"a": "v/w"}, "workload.labels.a", "invalid label value"),
        (
            {f"k{i}": "v" for i in range(validate.MAX_LABELS + 1)},
            "workload.labels",
            "at most 64 labels",
        ),
    ],
)
def test_invalid_labels_are_invalid_argument_naming_the_field(
    labels: dict[str, str], field: str, problem: str
) -> None:
    with pytest.raises(errors.InvalidArgument) as raised:
        validate.labels(labels, "workload.labels")
    assert raised.value.field == field
    assert problem in str(raised.value)


def test_labels_are_stored_and_selected_on_each_backend(store_url: str) -> None:
    """Written, read back, replaced and selected by, on SQLite and PostgreSQL (migration 0020)."""
    ctx = ServiceContext(db=open_store(store_url))
    projects.create(ctx, name="search", quotas={}, labels={"team": "search"})
    projects.create(ctx, name="ads", quotas={})
    with ctx.db.write() as conn:
        workloads_store.insert(
            conn,
            Workload(
                workload_id="wl_1",
                name="chat",
                project="search",
                replicas=0,
                device_class="H100-80GB",
                serving=CONFIG,
                placement=Placement(),
                create_time=1.0,
                update_time=1.0,
                labels={"app": "chat", "example.com/tier": ""},
            ),
        )
    with ctx.db.read() as conn:
        stored = workloads_store.get(conn, "chat")
    assert stored is not None and stored.labels == {"app": "chat", "example.com/tier": ""}
    assert projects.get(ctx, "search").project.labels == {"team": "search"}
    assert projects.get(ctx, "ads").project.labels == {}
    found, _ = projects.list_page(ctx, page_size=0, page_token="", label_selector="!team")
    assert [p.project.name for p in found] == ["ads"]
    projects.set_labels(ctx, name="ads", labels={"team": "ads"})
    found, _ = projects.list_page(ctx, page_size=1, page_token="", label_selector="team")
    assert [p.project.name for p in found] == ["ads"]
    listed, _ = workloads.list_page(
        ctx, project="", page_size=0, page_token="", label_selector="example.com/tier="
    )
    assert [v.workload.name for v in listed] == ["chat"]


def test_a_selector_of_too_many_requirements_is_refused_naming_the_bound() -> None:
    text = ",".join(f"k{i}" for i in range(selectors.MAX_REQUIREMENTS + 1))
    with pytest.raises(errors.InvalidArgument) as raised:
        selectors.parse(text)
    assert raised.value.field == "label_selector"
    assert f"at most {selectors.MAX_REQUIREMENTS}" in str(raised.value)
    assert (
        len(
            selectors.parse(
                ",".join(f"k{i}" for i in range(selectors.MAX_REQUIREMENTS))
            ).requirements
        )
        == selectors.MAX_REQUIREMENTS
    )


# Label sets over a few keys and values, including none, an empty value and a prefixed key.
STORED = [
    {},
    {"team": "a"},
    {"team": "b"},
    {"team": ""},
    {"team": "a", "tier": "gold"},
    {"tier": "gold"},
    {"example.com/owner": "ops", "team": "a"},
    {"example.com/owner": "dev"},
]
SELECTORS = [
    "team",
    "!team",
    "team=a",
    "team==a",
    "team!=a",
    "team=",
    "team!=",
    "team=a,tier=gold",
    "team!=a,!tier",
    "example.com/owner",
    "example.com/owner!=ops",
    "!example.com/owner,team",
    "absent!=x",
    "absent",
]


def test_the_store_selects_exactly_what_the_selector_matches_on_each_backend(
    store_url: str,
) -> None:
    """The SQL clauses (hub/store/labels.py) agree with `Selector.matches` on every pair of
    label set and selector, on SQLite and PostgreSQL, with pages of one and of all."""
    ctx = ServiceContext(db=open_store(store_url))
    for i, labels in enumerate(STORED):
        projects.create(ctx, name=f"p{i}", quotas={}, labels=labels)
    for text in SELECTORS:
        selector = selectors.parse(text)
        wanted = [f"p{i}" for i, labels in enumerate(STORED) if selector.matches(labels)]
        assert _paged(ctx, text, 0) == wanted, text
        assert _paged(ctx, text, 1) == wanted, text


def _paged(ctx: ServiceContext, text: str, page_size: int) -> list[str]:
    names: list[str] = []
    token = ""
    while True:
        page, token = projects.list_page(
            ctx, page_size=page_size, page_token=token, label_selector=text
        )
        if token:
            assert len(page) == page_size, "a page before the last is full"
        names += [p.project.name for p in page]
        if not token:
            return names
