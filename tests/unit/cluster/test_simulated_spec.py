from __future__ import annotations

import pytest

from agent.cluster.simulated.spec import GIB, NodeGroup, SimSpec


@pytest.mark.parametrize(
    ("text", "groups", "ready_after"),
    [
        (
            "nodes=2,gpus=8,class=H100-80GB,ready_after=2s",
            (NodeGroup(nodes=2, gpus=8, device_class="H100-80GB"),),
            2.0,
        ),
        ("nodes=1", (NodeGroup(),), 0.0),
        (" nodes = 3 , gpus = 4 ", (NodeGroup(nodes=3, gpus=4),), 0.0),
        ("ready_after=500ms", (NodeGroup(),), 0.5),
        ("ready_after=1m", (NodeGroup(),), 60.0),
        ("ready_after=1.5", (NodeGroup(),), 1.5),
        ("ready_after=0", (NodeGroup(),), 0.0),
        ("gpus=0", (NodeGroup(gpus=0),), 0.0),
        (
            "class=A100-40GB,gpus=4",
            (
                NodeGroup(
                    gpus=4,
                    device_class="A100-40GB",
                    memory_bytes=40 * GIB,
                    product_name="NVIDIA A100-SXM4-40GB",
                ),
            ),
            0.0,
        ),
        (
            "class=H100-80GB,memory=81920MiB",
            (NodeGroup(memory_bytes=80 * GIB),),
            0.0,
        ),
        (
            "class=X9-96GB",
            (
                NodeGroup(
                    device_class="X9-96GB", memory_bytes=96 * GIB, product_name="NVIDIA X9-96GB"
                ),
            ),
            0.0,
        ),
        (
            "class=Custom,memory=16GB",
            (
                NodeGroup(
                    device_class="Custom", memory_bytes=16 * 10**9, product_name="NVIDIA Custom"
                ),
            ),
            0.0,
        ),
        (
            "nodes=2,gpus=8,class=H100-80GB,ready_after=2s;nodes=1,gpus=4,class=A100-40GB,name_prefix=a100",
            (
                NodeGroup(nodes=2, gpus=8),
                NodeGroup(
                    nodes=1,
                    gpus=4,
                    device_class="A100-40GB",
                    memory_bytes=40 * GIB,
                    product_name="NVIDIA A100-SXM4-40GB",
                    name_prefix="a100",
                ),
            ),
            2.0,
        ),
        ("nodes=1,ready_after=2s;nodes=1,ready_after=2000ms", (NodeGroup(), NodeGroup()), 2.0),
    ],
)
def test_a_good_spec_string_parses_to_its_groups(
    text: str, groups: tuple[NodeGroup, ...], ready_after: float
) -> None:
    spec = SimSpec.parse(text)

    assert spec.groups == groups
    assert spec.ready_after == ready_after


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty simulated cluster spec"),
        ("nodes=2;;gpus=1", "group 2 ('')"),
        ("nodes", "'nodes' is not key=value"),
        ("nodes=2,colour=red", "unknown key 'colour'; accepted: nodes, gpus, class"),
        ("nodes=2,nodes=3", "key 'nodes' given twice"),
        ("nodes=", "key 'nodes' has no value"),
        ("nodes=0", "nodes='0': expected a whole number 1..1000"),
        ("nodes=two", "nodes='two': expected a whole number 1..1000"),
        ("gpus=-1", "gpus='-1': expected a whole number 0..64"),
        ("gpus=65", "gpus='65': expected a whole number 0..64"),
        ("class=H100 80GB", "class='H100 80GB' is not a device class name"),
        ("class=Mystery", "class='Mystery' is not in the catalog"),
        ("memory=80", "memory='80': expected a size with a unit"),
        ("memory=0GiB", "memory='0GiB': must be more than zero"),
        ("ready_after=2h", "ready_after='2h': expected a duration like 500ms, 2s, 1m"),
        ("ready_after=-1s", "ready_after='-1s'"),
        ("name_prefix=Big_Nodes", "name_prefix='Big_Nodes' must be a DNS label"),
        ("ready_after=1s;ready_after=2s", "conflicts with ready_after=1s"),
    ],
)
def test_a_bad_spec_string_says_which_key_is_wrong_and_what_is_accepted(
    text: str, says: str
) -> None:
    with pytest.raises(ValueError) as caught:
        SimSpec.parse(text)

    assert says in str(caught.value)


def test_totals_count_every_group() -> None:
    spec = SimSpec.parse("nodes=2,gpus=8;nodes=3,gpus=4,class=A100-40GB")

    assert (spec.total_nodes, spec.total_gpus) == (5, 28)
