"""Connect to the provider and learn both clusters' IDs, CIDRs and versions (what every stage needs)."""

from __future__ import annotations

import base64
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from liqo_peering import clusterprofile
from liqo_peering.api.model import ENDPOINT_ADDRESS_KEY, ENDPOINT_CA_KEY, MAX_ENDPOINT_LENGTH, LiqoPeeringSpec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clusterprofile import AccessProviders
from liqo_peering.errors import (
    ApiError,
    ClusterForbidden,
    ClusterProfileNotFound,
    ClusterProfileUnhealthy,
    KindNotServed,
    LiqoNotInstalled,
    LiqoNotReady,
    LiqoVersionSkew,
    NoAccessProvider,
    SecretKeyMissing,
    SecretNotFound,
)
from liqo_peering.kubeconfig import (
    CloudIdentity,
    KubeconfigInvalid,
    RemoteKubeconfig,
    cloud_kubeconfig,
    load_remote_kubeconfig,
)
from liqo_peering.liqo import naming, resources, versions
from liqo_peering.liqo.common import NONE, Common
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.tenancy import tenant_access_binding, tenant_namespace, tenant_namespace_selector
from liqo_peering.status import compute as status_compute


@dataclass(frozen=True)
class KubeconfigPolicy:
    allow_exec: bool = False
    allow_insecure_tls: bool = False
    # The administrator's access providers (--clusterprofile-provider-file), for spec.remoteClusterProfileRef.
    access_providers: AccessProviders = field(default_factory=AccessProviders)


@dataclass(frozen=True)
class TenantAccess:
    """Bind this ClusterRole to this ServiceAccount in every consumer tenant namespace (see tenancy.py)."""

    cluster_role: str
    sa_namespace: str
    sa_name: str


def read_remote_kubeconfig(
    local: ClusterClient,
    namespace: str,
    peering: str,
    spec: LiqoPeeringSpec,
    policy: KubeconfigPolicy,
    *,
    healthy: bool = True,
) -> RemoteKubeconfig:
    """The provider's kubeconfig: the Secret's, the one a ClusterProfile's access provider gives, or a managed
    cluster's with the operator's cloud identity. ``healthy``: refuse a ClusterProfile whose control plane is not
    healthy (peering; unpeering tries anyway)."""
    if spec.remote_cluster is not None:
        remote = spec.remote_cluster
        cloud = CloudIdentity(remote.provider, remote.cluster_name, remote.location)
        if remote.secret_ref is None:
            assert remote.address is not None and remote.certificate_authority_data is not None  # the spec's rule
            return cloud_kubeconfig(remote.address, remote.certificate_authority_data, cloud)
        address, ca_data = _endpoint_secret(local, namespace, peering, remote.secret_ref.name)
        return cloud_kubeconfig(address, ca_data, cloud)
    if spec.remote_cluster_profile_ref is not None:
        return read_profile_kubeconfig(
            local, namespace, peering, spec.remote_cluster_profile_ref.name, policy, healthy=healthy
        )
    ref = spec.secret_ref
    secret = local.get(resources.SECRET, ref.name, namespace)
    if secret is None:
        raise SecretNotFound(
            f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{ref.name} not found; create it with the"
            f" provider's kubeconfig under key {ref.key!r}"
        )
    value = (secret.get("data") or {}).get(ref.key)
    if not value:
        keys = ", ".join(sorted((secret.get("data") or {}).keys())) or "none"
        raise SecretKeyMissing(
            f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{ref.name} has no key {ref.key!r} (keys: {keys});"
            f" add it or set spec.remoteKubeconfigSecretRef.key"
        )
    return load_remote_kubeconfig(
        base64.b64decode(value),
        context=spec.remote_context,
        allow_exec=policy.allow_exec,
        allow_insecure_tls=policy.allow_insecure_tls,
    )


def _endpoint_secret(local: ClusterClient, namespace: str, peering: str, name: str) -> tuple[str, str]:
    """A managed cluster's endpoint and its CA (base64, as certificateAuthorityData) from the Secret that
    spec.remoteCluster.secretRef names; nothing else of it is read."""
    secret = local.get(resources.SECRET, name, namespace)
    where = f"LiqoPeering {namespace}/{peering}: Secret {namespace}/{name}"
    if secret is None:
        raise SecretNotFound(
            f"{where} not found; create it with the cluster's endpoint under key {ENDPOINT_ADDRESS_KEY!r} and its"
            f" CA certificate (PEM) under key {ENDPOINT_CA_KEY!r}"
        )
    data = secret.get("data") or {}
    missing = [key for key in (ENDPOINT_ADDRESS_KEY, ENDPOINT_CA_KEY) if not data.get(key)]
    if missing:
        keys = ", ".join(sorted(data)) or "none"
        raise SecretKeyMissing(
            f"{where} has no key {' nor '.join(repr(k) for k in missing)} (keys: {keys}); it must hold the cluster's"
            f" endpoint under {ENDPOINT_ADDRESS_KEY!r} and its CA certificate (PEM) under {ENDPOINT_CA_KEY!r}"
        )
    try:
        address = base64.b64decode(data[ENDPOINT_ADDRESS_KEY], validate=True).decode().strip()
    except (ValueError, UnicodeDecodeError):
        raise KubeconfigInvalid(f"{where}: key {ENDPOINT_ADDRESS_KEY!r} is not a URL") from None
    if len(address) > MAX_ENDPOINT_LENGTH or not address.startswith("https://"):
        raise KubeconfigInvalid(f"{where}: key {ENDPOINT_ADDRESS_KEY!r} must be the endpoint's https:// URL")
    return address, str(data[ENDPOINT_CA_KEY])  # already base64 of the PEM, as certificateAuthorityData


def read_profile_kubeconfig(
    local: ClusterClient,
    namespace: str,
    peering: str,
    profile_name: str,
    policy: KubeconfigPolicy,
    *,
    healthy: bool = True,
) -> RemoteKubeconfig:
    """The kubeconfig of the ClusterProfile's access provider (clusterprofile.py): refused while the profile
    says its control plane is not healthy, or offers none of the operator's access providers."""
    where = f"ClusterProfile {namespace}/{profile_name}"
    mine = f"LiqoPeering {namespace}/{peering}: "
    try:
        if not policy.access_providers.providers:  # said before anything is read: the operator may not read them
            clusterprofile.choose(policy.access_providers, {}, where)
        try:
            profile = local.get(resources.CLUSTER_PROFILE, profile_name, namespace)
        except KindNotServed:
            raise ClusterProfileNotFound(
                f"this cluster does not serve clusterprofiles.{clusterprofile.GROUP}; install the ClusterProfile CRD"
                " of sigs.k8s.io/cluster-inventory-api",
                transient=True,  # installing the CRD changes nothing that wakes the peering
            ) from None
        if profile is None:
            raise ClusterProfileNotFound(
                f"{where} not found; create it, or set spec.remoteClusterProfileRef.name to an existing one"
            )
        return clusterprofile.profile_kubeconfig(
            policy.access_providers, profile, where, allow_insecure_tls=policy.allow_insecure_tls, healthy=healthy
        )
    except (ClusterProfileNotFound, ClusterProfileUnhealthy, NoAccessProvider) as exc:
        raise exc.restated(mine + exc.message) from None  # a KubeconfigError is told whose by the pass


def _cluster_id_configmap(client: ClusterClient, liqo_namespace: str) -> dict[str, Any]:
    """Liqo's cluster-ID ConfigMap; a clear error when Liqo is absent."""
    maps = client.find(resources.CONFIGMAP, liqo_namespace, labels=naming.CLUSTER_ID_CONFIGMAP_SELECTOR)
    found = next((m for m in maps if (m.get("data") or {}).get(naming.CLUSTER_ID_KEY)), None)
    if found is None:
        field = "liqoNamespace" if client.side == "consumer" else "remoteLiqoNamespace"
        raise LiqoNotInstalled(
            f"no Liqo cluster-ID ConfigMap in namespace {liqo_namespace!r} of the {client.side} cluster"
            f" ({client.describe}); install Liqo there or fix spec.{field}"
        )
    return found


def cluster_id(client: ClusterClient, liqo_namespace: str) -> str:
    """The cluster ID from Liqo's ConfigMap; a clear error when Liqo is absent."""
    return str(_cluster_id_configmap(client, liqo_namespace)["data"][naming.CLUSTER_ID_KEY])


def cluster_info(client: ClusterClient, liqo_namespace: str, cache: VersionCache) -> ClusterInfo:
    """Cluster ID from Liqo's ConfigMap, CIDRs from Liqo's Networks, and which Liqo and Kubernetes run there;
    clear errors when Liqo is absent or too old."""
    configmap = _cluster_id_configmap(client, liqo_namespace)
    cluster_id_ = str(configmap["data"][naming.CLUSTER_ID_KEY])
    version = liqo_version(client, configmap, cache)
    refusal = versions.unsupported(client.side, client.describe, version)
    if refusal is not None:
        raise refusal
    networks = client.find(resources.NETWORK, liqo_namespace, labels=f"{naming.NETWORK_TYPE} in {_CIDR_TYPES}")
    pods = [n for n in networks if _network_type(n) == "pod-cidr"]
    external = [n for n in networks if _network_type(n) == "external-cidr"]
    pod_cidrs = tuple(str(n["status"]["cidr"]) for n in pods if (n.get("status") or {}).get("cidr"))
    ext = [str(n["status"]["cidr"]) for n in external if (n.get("status") or {}).get("cidr")]
    if not pod_cidrs or len(ext) != 1:
        raise LiqoNotReady(
            f"Liqo on the {client.side} cluster ({client.describe}) has not published its pod and external CIDRs"
            f" (ipam.liqo.io Networks in {liqo_namespace!r} without status.cidr); wait for Liqo's IPAM to be ready"
        )
    return ClusterInfo(
        cluster_id=cluster_id_,
        pod_cidrs=pod_cidrs,
        external_cidr=ext[0],
        liqo_namespace=liqo_namespace,
        liqo_version=version,
        kubernetes_version=kubernetes_version(client, cache),
        identity=_identity(configmap),
    )


# The Networks discovery reads, in one list: the pod CIDRs and the external CIDR.
_CIDR_TYPES = "(pod-cidr,external-cidr)"


def _network_type(network: dict[str, Any]) -> str | None:
    return ((network.get("metadata") or {}).get("labels") or {}).get(naming.NETWORK_TYPE)


def _identity(configmap: dict[str, Any]) -> tuple[str, str]:
    meta = configmap.get("metadata") or {}
    return (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))


def same_identity(client: ClusterClient, info: ClusterInfo) -> bool:
    """Whether Liqo's cluster-ID ConfigMap is still the one discovery read: a reinstall or an upgrade of Liqo
    rewrites it, and then the cluster is discovered again. Read where an informer holds it, as a pass does
    once its routes are in place."""
    try:
        return _identity(_cluster_id_configmap(client, info.liqo_namespace)) == info.identity
    except LiqoNotInstalled:
        return False


# What a cluster's API says about its versions, per client: read at most once in this long (a cluster is
# upgraded rarely; every discovery would otherwise ask again).
VERSION_CACHE_SECONDS = 600.0


class VersionCache:
    """What each client's cluster said about its versions, and when. Passes of different peerings share it
    from their threads, hence the lock; a client's entries go with the client (weak keys)."""

    def __init__(self, seconds: float = VERSION_CACHE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._lock = threading.Lock()
        self._entries: weakref.WeakKeyDictionary[ClusterClient, dict[str, tuple[float, Any]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, client: ClusterClient, key: str, read: Callable[[], Any]) -> Any:
        """The answer ``read`` gave for ``key`` on this client's cluster, read again once it is too old."""
        with self._lock:
            hit = self._entries.get(client, {}).get(key)
        if hit is not None and self.clock() - hit[0] < self.seconds:
            return hit[1]
        value = read()  # outside the lock: a slow cluster holds up no other peering's pass
        with self._lock:
            self._entries.setdefault(client, {})[key] = (self.clock(), value)
        return value


def kubernetes_version(client: ClusterClient, cache: VersionCache) -> str | None:
    """The API server's gitVersion (GET /version, which every client may read); None if it will not say."""

    def read() -> str | None:
        try:
            answer = client.read_path("/version")
        except ApiError:
            return None
        return str(answer["gitVersion"]) if isinstance(answer, dict) and answer.get("gitVersion") else None

    return cast("str | None", cache.get(client, "kubernetes", read))


def liqo_version(client: ClusterClient, configmap: dict[str, Any], cache: VersionCache) -> versions.LiqoVersion:
    """The chart's version label on the cluster-ID ConfigMap; without a release there (a development build),
    what the API's shape proves (discovery documents every authenticated user may read)."""
    label = ((configmap.get("metadata") or {}).get("labels") or {}).get(versions.VERSION_LABEL)
    found = versions.from_label(label)
    if found.known:
        return found

    def probe() -> tuple[bool, bool]:
        group = client.read_path(f"/apis/{resources.TENANT.group}")
        if group is None:
            return False, False
        core = client.read_path(
            f"/openapi/v3/apis/{resources.FOREIGN_CLUSTER.group}/{resources.FOREIGN_CLUSTER.version}"
        )
        return True, _has_observed_generation(core, resources.FOREIGN_CLUSTER.kind)

    has_auth, fc_generation = cache.get(client, f"liqo-shape:{label}", probe)
    return versions.from_shape(label, has_auth, fc_generation)


def _has_observed_generation(document: Any, kind: str) -> bool:
    """Whether an OpenAPI v3 document's schema of ``kind`` has status.observedGeneration."""
    schemas = ((document or {}).get("components") or {}).get("schemas") or {}
    for name, schema in schemas.items():
        if str(name).rsplit(".", 1)[-1] == kind:
            status = ((schema.get("properties") or {}).get("status") or {}).get("properties") or {}
            return "observedGeneration" in status
    return False


def ensure_tenant_namespace(client: ClusterClient, peer_id: str, owner: dict[str, str], common: Common = NONE) -> str:
    """Find the tenant namespace for a peer by Liqo's labels, or create the default one. One this peering made
    gets the current common labels and annotations (spec.commonMetadata)."""
    found = _tenant_namespace(client, peer_id)
    if found is not None:
        name = str(found["metadata"]["name"])
        client.relabel(resources.NAMESPACE, found, tenant_namespace(peer_id, name, owner, common), owner)
        return name
    name = naming.tenant_namespace(peer_id)
    client.create_or_relabel(resources.NAMESPACE, tenant_namespace(peer_id, name, owner, common), owner)
    return name


def find_tenant_namespace(client: ClusterClient, peer_id: str) -> str | None:
    found = _tenant_namespace(client, peer_id)
    return str(found["metadata"]["name"]) if found is not None else None


def _tenant_namespace(client: ClusterClient, peer_id: str) -> dict[str, Any] | None:
    try:
        found = client.find(resources.NAMESPACE, labels=tenant_namespace_selector(peer_id))
    except ClusterForbidden:
        # Liqo's peering-user may get only its own tenant namespace (which liqoctl generate peering-user
        # made, under Liqo's default name), not list namespaces.
        return client.get(resources.NAMESPACE, naming.tenant_namespace(peer_id))
    return sorted(found, key=lambda ns: str(ns["metadata"]["name"]))[0] if found else None


def ensure_tenant_access(
    client: ClusterClient, namespace: str, access: TenantAccess, owner: dict[str, str], common: Common = NONE
) -> None:
    client.ensure(
        resources.ROLE_BINDING,
        tenant_access_binding(namespace, access.cluster_role, access.sa_namespace, access.sa_name, owner, common),
    )


SKEW_FIELD = "spec.allowLiqoVersionSkew"


@dataclass(frozen=True)
class VersionCheck:
    """The status block of both clusters' versions, the conditions they call for, and a refusal if any."""

    versions: dict[str, Any]
    notices: tuple[status_compute.VersionNotice, ...]
    refusal: LiqoVersionSkew | None


def check_versions(ctx: PeeringContext, spec: LiqoPeeringSpec, status: dict[str, Any]) -> VersionCheck:
    """Judge the pair of Liqo versions (liqo/versions.py) for this pass; ``status``: the peering's last one."""
    verdict = versions.judge(
        ctx.consumer.liqo_version,
        ctx.provider.liqo_version,
        spec.allow_liqo_version_skew,
        established=status_compute.skew_tolerated(status),
        skew_field=SKEW_FIELD,
    )
    notices = tuple(status_compute.VersionNotice(n.type, n.reason, n.message, n.warn) for n in verdict.notices)
    return VersionCheck(version_block(ctx.consumer, ctx.provider), notices, verdict.refusal)


def version_block(consumer: ClusterInfo, provider: ClusterInfo) -> dict[str, Any]:
    """status.versions; a value nobody could read is left out, so that the block compares equal at rest."""

    def side(info: ClusterInfo) -> dict[str, str]:
        found = {"liqo": info.liqo_version.describe(), "kubernetes": info.kubernetes_version}
        return {k: v for k, v in found.items() if v}

    return {"consumer": side(consumer), "provider": side(provider)}
