"""Building the one kubernetes ApiClient a hangar process uses: in-cluster or kubeconfig.

`load_api_client()` is called once by the agent's wiring; the client it returns is shared by
the watch caches of `KubernetesCluster` and, later, by the Lease elector, so keep it free of
anything cluster-adapter specific (read-only mode wraps it, agent/cluster/kube/readonly.py,
and leaves the shared client as it is).

Order: with an explicit kubeconfig (or context), that file; otherwise the pod's service
account (KUBERNETES_SERVICE_HOST/PORT, token and CA under /var/run/secrets), falling back to
the default kubeconfig ($KUBECONFIG, else ~/.kube/config) for a developer's laptop. The service
account token is re-read as the kubelet rotates it (the client's refresh hook). The token
and CA paths and the environment are parameters so tests can point them at files of their
own. Only agent/cluster/kube/ imports this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import yaml
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from agent.cluster.kube.errors import KubeConfigError

SERVICE_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

# Each watch holds a connection for its whole life (three kinds, times watched namespaces),
# and applies need some more: the client's default (5 x CPUs) is small on a 2-core node.
MIN_CONNECTION_POOL = 32

_LOAD_ERRORS = (ConfigException, OSError, ValueError, yaml.YAMLError)


def load_api_client(
    *,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    token_file: str = SERVICE_TOKEN_FILE,
    ca_file: str = SERVICE_CA_FILE,
    environ: Mapping[str, str] | None = None,
) -> ApiClient:
    """A kubernetes `ApiClient`; raises KubeConfigError when no configuration works."""
    configuration = Configuration()
    if kubeconfig is not None or context is not None:
        _from_kubeconfig(configuration, kubeconfig=kubeconfig, context=context)
    else:
        env = os.environ if environ is None else environ
        try:
            _in_cluster(configuration, token_file=token_file, ca_file=ca_file, environ=env)
        except _LOAD_ERRORS as in_cluster:
            try:
                _from_kubeconfig(configuration, kubeconfig=_default_kubeconfig(env), context=None)
            except KubeConfigError as e:
                raise KubeConfigError(
                    f"not in a cluster ({in_cluster}) and no usable kubeconfig ({e})"
                ) from e
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, MIN_CONNECTION_POOL
    )
    return ApiClient(configuration=configuration)


def _default_kubeconfig(environ: Mapping[str, str]) -> str:
    # Read at call time: the client's own default is fixed when it is imported.
    home = environ.get("HOME") or os.path.expanduser("~")
    return environ.get("KUBECONFIG") or os.path.join(home, ".kube", "config")


def _in_cluster(
    configuration: Configuration, *, token_file: str, ca_file: str, environ: Mapping[str, str]
) -> None:
    # The config loaders carry no annotations; our signatures state their types.
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=token_file, cert_filename=ca_file, environ=environ
    )
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]


def _from_kubeconfig(
    configuration: Configuration,
    *,
    kubeconfig: str | os.PathLike[str] | None,
    context: str | None,
) -> None:
    try:
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=None if kubeconfig is None else os.fspath(kubeconfig),
            context=context,
            client_configuration=configuration,
            # Never write refreshed credentials back into the user's file.
            persist_config=False,
        )
    except _LOAD_ERRORS as e:
        raise KubeConfigError(f"kubeconfig {kubeconfig or '(default)'}: {e}") from e
