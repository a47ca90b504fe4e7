"""Dynamo's runtime version: which image tags it reads, and what the agent writes when it cannot.

The rule is Dynamo's (runtimeversion.ParseImageVersion, shared/reference/dynamo-crds/README.md):
strict Semantic Versioning 2.0.0 with an optional leading v/V. An image whose tag is not one
needs `runtimeVersionOverride`, on v1beta1 and v1alpha1 writes alike; the value comes from the
workload (serving.runtime_version) or the operator version read on the cluster, never a guess.
"""

from __future__ import annotations

import pytest

from agent.cluster import dgd_versions
from agent.render import dgd
from agent.render.errors import InvalidField
from tests.fake_kube import dynamo as fake_dynamo
from tests.unit.render.builders import make_deployment, make_serving

VERSIONS = [
    "1.3.1",
    "v1.3.1",
    "V1.3.1",
    "0.0.0",
    "1.3.1-rc.1",
    "1.3.1-rc1",
    "1.3.1-0",
    "1.3.1-0a.1",
    "1.3.1-patched",
    "1.3.1+build.5",
    "1.3.1-rc.1+build-5",
    "10.20.30",
    "1.0.0-alpha-a.b-c",
]
NOT_VERSIONS = [
    "latest",
    "dev",
    "1.3",
    "1",
    "1.3.1.post1",
    "01.3.1",
    "1.03.1",
    "1.3.01",
    "1.3.1-rc.01",
    "1.3.1+a+b",
    "1.3.1-",
    "1.3.1+",
    "1.3.1-rc..1",
    "vv1.3.1",
    "1.3.1_rc1",
    "",
]


@pytest.mark.parametrize("tag", VERSIONS)
def test_strict_semantic_versions_are_read_off_the_tag(tag: str) -> None:
    assert dgd_versions.versioned(f"registry.local:5000/team/vllm:{tag}")
    assert fake_dynamo.parse_image_version(f"registry.local:5000/team/vllm:{tag}")


@pytest.mark.parametrize("tag", NOT_VERSIONS)
def test_anything_else_is_not_a_version(tag: str) -> None:
    image = f"registry.local:5000/team/vllm:{tag}" if tag else "registry.local:5000/team/vllm"
    assert not dgd_versions.versioned(image)
    assert not fake_dynamo.parse_image_version(image)


def test_a_digest_alone_is_not_a_version_but_a_tag_with_a_digest_is() -> None:
    digest = "sha256:" + "a" * 64
    assert not dgd_versions.versioned(f"nvcr.io/vllm@{digest}")
    assert dgd_versions.versioned(f"nvcr.io/vllm:1.5.0@{digest}")
    assert dgd_versions.image_version(f"nvcr.io/vllm:v1.5.0-rc.2@{digest}") == "1.5.0"


@pytest.mark.parametrize("tag", ["1.3.1.post1", "01.3.1", "1.3.1-rc.01", "1.3.1+a+b", "1.3.1-"])
@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_an_unparseable_tag_gets_the_workloads_runtime_version_on_either_write(
    tag: str, version: str
) -> None:
    spec = make_deployment(
        serving=make_serving(image=f"mirror.local/vllm:{tag}", runtime_version="1.4.0")
    )
    manifest = dgd.render_dgd_as(version, spec, namespace="serving")
    spec_key = "services" if version == "v1alpha1" else "components"
    entries = manifest["spec"][spec_key]
    for entry in entries.values() if isinstance(entries, dict) else entries:
        assert entry["runtimeVersionOverride"] == "1.4.0"
    assert manifest["metadata"]["annotations"][dgd.ANNOTATION_RUNTIME_VERSION] == (
        "1.4.0 (serving.runtime_version)"
    )


def test_without_a_workload_version_the_clusters_operator_version_is_written_and_said() -> None:
    spec = make_deployment(serving=make_serving(image="mirror.local/vllm:latest"))
    manifest = dgd.render_dgd(spec, namespace="serving", operator_version="1.5.0")
    for service in manifest["spec"]["services"].values():
        assert service["runtimeVersionOverride"] == "1.5.0"
    assert manifest["metadata"]["annotations"][dgd.ANNOTATION_RUNTIME_VERSION] == (
        "1.5.0 (the cluster's Dynamo operator)"
    )


def test_with_neither_the_deployment_is_refused_naming_the_field() -> None:
    spec = make_deployment(serving=make_serving(image="mirror.local/vllm:1.3.1.post1"))
    with pytest.raises(InvalidField) as refused:
        dgd.render_dgd(spec, namespace="serving")
    assert refused.value.field == "serving.runtime_version"
    assert "1.3.1.post1" in refused.value.problem


def test_a_versioned_image_gets_no_override_unless_the_workload_names_one() -> None:
    versioned = make_deployment(serving=make_serving(image="mirror.local/vllm:1.5.0"))
    manifest = dgd.render_dgd(versioned, namespace="serving", operator_version="1.5.0")
    assert all("runtimeVersionOverride" not in s for s in manifest["spec"]["services"].values())
    assert "annotations" not in manifest["metadata"]
    # The workload's version wins over the tag (Dynamo's rule: the override wins).
    pinned = make_deployment(
        serving=make_serving(image="mirror.local/vllm:2.0.0", runtime_version="1.5.0")
    )
    manifest = dgd.render_dgd(pinned, namespace="serving")
    assert {s["runtimeVersionOverride"] for s in manifest["spec"]["services"].values()} == {"1.5.0"}


@pytest.mark.parametrize("bad", ["1.5", "v1.5.0", "1.5.0-rc.1", "01.5.0", "10000.0.0"])
def test_a_runtime_version_not_in_the_crds_form_is_refused(bad: str) -> None:
    spec = make_deployment(serving=make_serving(runtime_version=bad))
    with pytest.raises(InvalidField) as refused:
        dgd.render_dgd(spec, namespace="serving")
    assert refused.value.field == "serving.runtime_version"


def test_the_operator_version_is_the_newest_the_webhook_stamped() -> None:
    key = dgd_versions.ORIGIN_VERSION_ANNOTATION
    stamped = [{key: "1.3.0"}, {key: "v1.5.0-dev.1"}, {}, {key: "garbage"}, {key: "1.4.2"}]
    assert dgd_versions.operator_version(stamped) == "1.5.0"
    assert dgd_versions.operator_version([{}, {key: "dev"}]) == ""


def test_the_default_image_needs_no_override() -> None:
    manifest = dgd.render_dgd(make_deployment(), namespace="serving")
    assert all("runtimeVersionOverride" not in s for s in manifest["spec"]["services"].values())
