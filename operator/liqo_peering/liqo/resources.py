"""Coordinates of every Kubernetes and Liqo resource the operator touches."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """REST path, such as /apis/networking.liqo.io/v1beta1/namespaces/x/gatewayservers/y/status."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
        return base


# Not a resource: the API server's readiness (GET /readyz), which the watch hub probes like an informer
# lists, so that a provider that stops answering is noticed while nothing else is asked of it.
HEALTH = Resource("", "", "readyz", "Health", namespaced=False)
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SECRET = Resource("", "v1", "secrets", "Secret")
CONFIGMAP = Resource("", "v1", "configmaps", "ConfigMap")
EVENT = Resource("", "v1", "events", "Event")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
POD = Resource("", "v1", "pods", "Pod")
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
ROLE_BINDING = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
ROLE = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
CLUSTER_ROLE = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDING = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
CSR = Resource("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", namespaced=False)

NETWORK = Resource("ipam.liqo.io", "v1alpha1", "networks", "Network")
IP = Resource("ipam.liqo.io", "v1alpha1", "ips", "IP")
CONFIGURATION = Resource("networking.liqo.io", "v1beta1", "configurations", "Configuration")
GATEWAY_SERVER = Resource("networking.liqo.io", "v1beta1", "gatewayservers", "GatewayServer")
GATEWAY_CLIENT = Resource("networking.liqo.io", "v1beta1", "gatewayclients", "GatewayClient")
PUBLIC_KEY = Resource("networking.liqo.io", "v1beta1", "publickeies", "PublicKey")
CONNECTION = Resource("networking.liqo.io", "v1beta1", "connections", "Connection")
WG_SERVER_TEMPLATE = Resource("networking.liqo.io", "v1beta1", "wggatewayservertemplates", "WgGatewayServerTemplate")
WG_CLIENT_TEMPLATE = Resource("networking.liqo.io", "v1beta1", "wggatewayclienttemplates", "WgGatewayClientTemplate")
TENANT = Resource("authentication.liqo.io", "v1beta1", "tenants", "Tenant")
IDENTITY = Resource("authentication.liqo.io", "v1beta1", "identities", "Identity")
RENEW = Resource("authentication.liqo.io", "v1beta1", "renews", "Renew")
RESOURCE_SLICE = Resource("authentication.liqo.io", "v1beta1", "resourceslices", "ResourceSlice")
VIRTUAL_NODE = Resource("offloading.liqo.io", "v1beta1", "virtualnodes", "VirtualNode")
NAMESPACE_MAP = Resource("offloading.liqo.io", "v1beta1", "namespacemaps", "NamespaceMap")
FOREIGN_CLUSTER = Resource("core.liqo.io", "v1beta1", "foreignclusters", "ForeignCluster", namespaced=False)

# What a LiqoPeeringSet may pick its providers from, besides kubeconfig Secrets (spec.source); a ClusterProfile
# is also a LiqoPeering's provider (spec.remoteClusterProfileRef).
CAPI_CLUSTER = Resource("cluster.x-k8s.io", "v1beta2", "clusters", "Cluster")
CLUSTER_PROFILE = Resource("multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile")

LIQOPEERING = Resource("peering.liqo-operator.io", "v1alpha1", "liqopeerings", "LiqoPeering")
LIQOPEERINGSET = Resource("peering.liqo-operator.io", "v1alpha1", "liqopeeringsets", "LiqoPeeringSet")
