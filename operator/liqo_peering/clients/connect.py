"""Build a Kubernetes API client for a cluster from a vetted kubeconfig or the local configuration."""

from __future__ import annotations

import copy
import functools

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from liqo_peering import __version__
from liqo_peering.clients.cloud import cloud_token
from liqo_peering.clients.execplugin import ExecToken, run_plugin
from liqo_peering.clusterprofile import exec_cluster, exec_config
from liqo_peering.kubeconfig import RemoteKubeconfig

# Connections kept per cluster. Each request thread holds one while peerings reconcile and tear down
# concurrently; urllib3's default of 10 made it discard connections (and warn) with a few peerings.
CONNECTION_POOL_SIZE = 32
# Names the operator in the API servers' audit logs and request metrics.
USER_AGENT = f"liqo-peering-operator/{__version__}"


def pooled(configuration: k8s_client.Configuration) -> k8s_client.Configuration:
    """Connections as every API client of the operator holds them: CONNECTION_POOL_SIZE per cluster, and TCP
    keepalive with client-go's timings (probed after 30 s idle, every 15 s, 9 times).

    A watch reads and never writes: a connection whose NAT or conntrack state was lost (a flushed conntrack
    table, a load balancer's or NAT gateway's idle timeout, a restarted node proxy) would otherwise wait for
    the watch's own read timeout, minutes, while events are lost; the first probe meets a reset instead.
    """
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    configuration.keep_alive = True
    return configuration


def with_user_agent(api: k8s_client.ApiClient) -> k8s_client.ApiClient:
    api.user_agent = USER_AGENT
    return api


def refuse_redirects(manager: urllib3.PoolManager) -> None:
    """Make ``manager`` hand back a redirect as it is, never follow it.

    A redirect sends the request, with its credentials, elsewhere: the API server's own answers are never
    redirects, so one comes from something else at its address, and the client reports it
    (``ClusterClient._refusal``). The pool's ``Retry(redirect=0)`` below does not cover it: PoolManager
    follows redirects itself, with a default Retry of its own, unless each request says ``redirect=False``,
    which the Kubernetes client's REST layer never does.
    """
    manager.urlopen = functools.partial(manager.urlopen, redirect=False)  # type: ignore[method-assign]


def exec_token(remote: RemoteKubeconfig) -> ExecToken | None:
    """The token holder of a ClusterProfile's access provider, whose plugin the operator runs itself (bounded),
    or of a managed cluster reached with the operator's cloud identity (spec.remoteCluster); None for any other
    kubeconfig."""
    if remote.cloud is not None:
        cloud = remote.cloud
        return ExecToken(lambda: cloud_token(cloud))
    if remote.access_provider is None:
        return None
    provider, config, cluster = remote.access_provider, exec_config(remote), exec_cluster(remote)
    return ExecToken(lambda: run_plugin(provider, config, cluster))


def to_api_client(remote: RemoteKubeconfig, token: ExecToken | None = None) -> k8s_client.ApiClient:
    """Build a dedicated ApiClient (own Configuration, never the global default).

    No file is written by this module. Note: the Kubernetes Python client itself materialises
    ``*-data`` fields (CA, client cert/key) as temporary files, because Python's ``ssl`` needs paths.
    ``token``: the access provider's (exec_token), which every request asks for its header, in place of the
    kubeconfig's exec user; its first token is fetched here, so that a failing plugin fails the connection.
    """
    configuration = pooled(k8s_client.Configuration())
    # urllib3 would retry a GET whose answer timed out three times, so a hung provider took four timeouts
    # to report; connection failures are still retried once. Not other errors either: a TLS handshake
    # interrupted because the server was found down (ClusterClient.interrupt) would hang again on a retry.
    # A 429 or 503 with Retry-After is an answer, returned as such: urllib3 would make it "too many 429 error
    # responses", an unreachable cluster (an API server just back answers 429 "storage is (re)initializing"
    # until its watch caches are filled).
    configuration.retries = urllib3.Retry(
        total=1, connect=1, read=0, other=0, redirect=0, status=0, respect_retry_after_header=False
    )
    config = copy.deepcopy(remote.config)
    if token is not None:
        for user in config["users"]:
            user["user"] = {}  # the plugin is run by ``token``, within bounds
        configuration.api_key["BearerToken"] = token.bearer()
        configuration.refresh_api_key_hook = token.hook  # type: ignore[assignment]
    api_client: k8s_client.ApiClient = k8s_config.new_client_from_config_dict(
        config_dict=config,
        context=remote.context_name,
        persist_config=False,
        client_configuration=configuration,
    )
    return with_user_agent(api_client)
