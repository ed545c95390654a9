"""Names and labels shared by Liqo and by this operator."""

from __future__ import annotations

import hashlib

# Liqo's own labels and names (pkg/consts in Liqo v1.2).
REMOTE_CLUSTER_ID = "liqo.io/remote-cluster-id"
TENANT_NAMESPACE_LABEL = "liqo.io/tenant-namespace"
CLUSTER_ID_CONFIGMAP_SELECTOR = "app.kubernetes.io/name=clusterid-configmap"
CLUSTER_ID_KEY = "CLUSTER_ID"
NETWORK_TYPE = "ipam.liqo.io/network-type"
GATEWAY_RESOURCE = "networking.liqo.io/gateway-resource"
NONCE_LABEL = "liqo.io/nonce"
SIGNED_NONCE_LABEL = "liqo.io/signed-nonce"
NONCE_SECRET = "liqo-nonce"
API_SERVER_PROXY_IP = "api-server-proxy"  # ipam.liqo.io IP in the Liqo namespace: the proxy's external-CIDR IP
SIGNED_NONCE_SECRET = "liqo-signed-nonce"
NONCE_FIELD = "nonce"
SIGNED_NONCE_FIELD = "signedNonce"
AUTH_KEYS_SECRET = "authentication-keys"
REPLICATION = "liqo.io/replication"
REMOTE_ID = "liqo.io/remoteID"
CREATE_VIRTUAL_NODE = "liqo.io/create-virtual-node"
RESOURCE_SLICE_NAME = "liqo.io/resourceslice-name"  # on a VirtualNode: the ResourceSlice it was made from
# On an object Liqo's crd-replicator copied in from the other cluster (the original is over there).
REPLICATED = "liqo.io/replicated"
VIRTUAL_NODE_TYPE = "liqo.io/type"
VIRTUAL_NODE_TYPE_VALUE = "virtual-node"
# The virtual kubelet's Pods (pkg/vkMachinery/forge in Liqo): Liqo judges a virtual node by them.
VK_COMPONENT = "offloading.liqo.io/component"
VK_COMPONENT_VALUE = "virtual-kubelet"
VIRTUAL_NODE_LABEL = "liqo.io/virtual-node"  # on the virtual kubelet's Pods: their VirtualNode
# On the gateway Deployments Liqo's chart templates make (liqo.selectorTemplate in _helpers.tpl, v1.0 to v1.2).
GATEWAY_COMPONENT_SELECTOR = "networking.liqo.io/component=gateway"
SERVER_TEMPLATE = "wireguard-server"
CLIENT_TEMPLATE = "wireguard-client"
POD_SECURITY = ("enforce", "audit", "warn")

# This operator's labels: every object it makes carries them, so it can find all of a peering's objects.
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "liqo-peering-operator"
PEERING_NAMESPACE = "peering.liqo-operator.io/peering-namespace"
PEERING_NAME = "peering.liqo-operator.io/peering-name"
FORCE_DELETE = "peering.liqo-operator.io/force-delete"
# The keys of spec.commonMetadata an object was given (liqo/common.py), so that dropped ones can be removed.
COMMON_METADATA = "peering.liqo-operator.io/common-metadata"
# Liqo's own (pkg/consts, v1.1+): on a ForeignCluster, the peer will never come back. Liqo's CRD replicator and
# the virtual node's drain stop waiting for it (foreigncluster.IsDead), as after liqoctl force unpeer.
PERMANENTLY_UNREACHABLE = "liqo.io/foreign-cluster-permanently-unreachable"
# On the kubeconfig Secret while a LiqoPeering uses it: unpeering needs the provider's kubeconfig.
KUBECONFIG_IN_USE = "peering.liqo-operator.io/kubeconfig-in-use"
# The operator's (kopf's) finalizer on LiqoPeerings and LiqoPeeringSets: removed once their teardown is over.
OPERATOR_FINALIZER = "peering.liqo-operator.io/finalizer"
# LiqoPeeringSets: the label naming a LiqoPeering's set, and the annotation recording the spec the set last
# wrote into it (to tell a template change from an edit of the LiqoPeering itself).
SET_LABEL = "peering.liqo-operator.io/set"
SET_SPEC_HASH = "peering.liqo-operator.io/set-spec-hash"
FIELD_MANAGER = "liqo-peering-operator"


def tenant_namespace(peer_cluster_id: str) -> str:
    """Default tenant namespace for a peer; existing ones are found by label, not by this name."""
    return f"liqo-tenant-{peer_cluster_id}"


def gateway_deployment(gateway_name: str) -> str:
    return f"gw-{gateway_name}"


def identity_name(provider_cluster_id: str) -> str:
    return f"controlplane-{provider_cluster_id}"


IDENTITY_TYPE = "liqo.io/identity-type"  # on the kubeconfig Secret Liqo writes from an Identity


def control_plane_secrets(peer_cluster_id: str) -> str:
    """The ControlPlane kubeconfig Secret(s) Liqo makes from the Identity for a peer (label selector)."""
    return f"{IDENTITY_TYPE}=ControlPlane,{REMOTE_CLUSTER_ID}={peer_cluster_id}"


def identity_secrets(peer_cluster_id: str) -> str:
    """The kubeconfig Secrets Liqo makes from every Identity for a peer, ControlPlane and ResourceSlice ones
    (label selector)."""
    return f"{IDENTITY_TYPE},{REMOTE_CLUSTER_ID}={peer_cluster_id}"


def replicated_to(peer_cluster_id: str) -> str:
    """What Liqo's CRD replicator copies to a peer (label selector): the original, here, keeps its finalizer
    crdreplicator.liqo.io/resource until the copy over there is gone (internal/crdReplicator/reflection)."""
    return f"{REPLICATION}=true,{REMOTE_ID}={peer_cluster_id}"


def owner_labels(namespace: str, name: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, PEERING_NAMESPACE: namespace, PEERING_NAME: name}


def owner_selector(namespace: str, name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in owner_labels(namespace, name).items())


MINTED_SUFFIX = "-provider-credentials"


def minted_secret(peering_name: str) -> str:
    """The Secret holding a peering's minted kubeconfig, next to it: its name and a suffix, hashed down to
    Secret's 253 characters when the peering's name is long."""
    name = peering_name + MINTED_SUFFIX
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(peering_name.encode()).hexdigest()[:10]
    return f"{peering_name[: 253 - len(MINTED_SUFFIX) - 11].rstrip('.-')}-{digest}{MINTED_SUFFIX}"
