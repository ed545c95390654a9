"""LiqoPeering v1alpha1: the pydantic model every other copy (CRD, chart, docs) is generated from.

Field descriptions become the CRD's OpenAPI descriptions and the generated field reference
(docs/reference/liqopeering-fields.md). CEL rules live next to the model they constrain
(``x-kubernetes-validations`` in ``json_schema_extra``) so the API server rejects bad input with the same
words the docs use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonDict

GROUP = "peering.liqo-operator.io"
VERSION = "v1alpha1"
KIND = "LiqoPeering"
PLURAL = "liqopeerings"
SINGULAR = "liqopeering"
SHORT_NAMES = ("lp",)
CATEGORIES = ("liqo",)
API_VERSION = f"{GROUP}/{VERSION}"

# Go's time.ParseDuration subset people write in manifests: 90s, 10m, 1h30m, 1.5h.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# Kubernetes resource.Quantity, as the core API's own OpenAPI schema spells it.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SECRET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

Port = Annotated[int, Field(ge=1, le=65535)]
# The cluster that runs the gateway server (liqoctl's --gw-server-service-location values).
GatewayLocation = Literal["Provider", "Consumer"]
# int-or-string, like every Kubernetes quantity: `cpu: 4` and `memory: 8Gi` both work.
Quantity = int | Annotated[str, Field(pattern=QUANTITY_PATTERN, max_length=64)]

# Bounds on every string, list and map of the spec, so that what a user writes is read within bounds (the
# API server enforces them from the CRD; tests/unit/test_crd_bounds.py checks none is missing). A host name
# or an IP address fits in a DNS name's 253 characters.
MAX_NAME_LENGTH = 253
MAX_URL_LENGTH = 2048
MAX_DURATION_LENGTH = 32
MAX_RESOURCES = 32
# Kubernetes caps an object's annotations at 256 KiB in all: 64 values of 4 KiB.
MAX_ANNOTATION_VALUE_LENGTH = 4096


def parse_duration(value: str) -> float:
    """Seconds in a duration such as ``90s``, ``10m`` or ``1h30m``."""
    if not re.fullmatch(DURATION_PATTERN, value):
        raise ValueError(f"invalid duration {value!r}: use a number with a unit, such as 90s, 10m or 1h")
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(num) * units[unit] for num, _, unit in re.findall(r"([0-9]+(\.[0-9]+)?)(ms|s|m|h)", value))


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _cel(rule: str, message: str, field_path: str) -> JsonDict:
    return {"rule": rule, "message": message, "fieldPath": field_path}


# The cross-field rules: CEL for the API server, the same checks in the validators below for input that
# bypassed admission (parse_spec). tests/unit/test_property_spec_schema.py evaluates the CEL and checks
# both agree.
NODE_PORT_RULE = _cel(
    "!has(self.nodePort) || self.serviceType == 'NodePort'",
    "nodePort can only be set when serviceType is NodePort",
    ".nodePort",
)
LOAD_BALANCER_IP_RULE = _cel(
    "!has(self.loadBalancerIP) || self.serviceType == 'LoadBalancer'",
    "loadBalancerIP can only be set when serviceType is LoadBalancer",
    ".loadBalancerIP",
)
PROXY_URL_RULE = _cel(
    "!has(self.proxyURL) || isURL(self.proxyURL)",
    "proxyURL must be a URL such as http://proxy.example:8118",
    ".proxyURL",
)
VIRTUAL_NODE_RULE = _cel(
    "!self.createVirtualNode || self.createResourceSlice",
    "createVirtualNode needs createResourceSlice: virtual nodes come from ResourceSlices",
    ".createVirtualNode",
)
DELETE_BOOTSTRAP_RULE = _cel(
    "!self.deleteBootstrapSecret || self.mint",
    "deleteBootstrapSecret needs mint: without minted credentials the bootstrap Secret is the credential",
    ".deleteBootstrapSecret",
)
LIFETIME_RULE = _cel(
    "!has(self.certificateLifetime) || (self.mint && duration(self.certificateLifetime) >= duration('10m')"
    " && duration(self.certificateLifetime) <= duration('87600h'))",
    "certificateLifetime needs mint, and from 10m (the shortest certificate Kubernetes issues) to 87600h",
    ".certificateLifetime",
)
# Kubernetes refuses a CSR's spec.expirationSeconds below 600; ten years is plenty above.
MIN_CERTIFICATE_LIFETIME_SECONDS = 600.0
MAX_CERTIFICATE_LIFETIME_SECONDS = 87600 * 3600.0
# Keys in Liqo's and this operator's own domains: they say what Liqo and the operator made, and a user's value
# in their place would be overwritten on every pass, or mislead Liqo.
RESERVED_KEY_PATTERN = r"^([^/]*\.)?(liqo\.io|liqo-operator\.io)/"
RESERVED_KEYS = ("app.kubernetes.io/managed-by",)
_NOT_RESERVED = (
    # A CEL string literal: its backslashes escaped once more.
    f"!k.matches('{RESERVED_KEY_PATTERN.replace(chr(92), chr(92) * 2)}') && !(k in {list(RESERVED_KEYS)!r})"
)
_RESERVED_MESSAGE = (
    " in Liqo's and the operator's own domains (liqo.io/, *.liqo.io/, *.liqo-operator.io/,"
    " app.kubernetes.io/managed-by) are set by Liqo and the operator: choose other keys"
)
RESERVED_LABELS_RULE = _cel(
    f"!has(self.labels) || self.labels.all(k, {_NOT_RESERVED})", "labels" + _RESERVED_MESSAGE, ".labels"
)
RESERVED_ANNOTATIONS_RULE = _cel(
    f"!has(self.annotations) || self.annotations.all(k, {_NOT_RESERVED})",
    "annotations" + _RESERVED_MESSAGE,
    ".annotations",
)
# A transition rule (it compares with the stored object), so it has no counterpart in the validators below.
LOCATION_RULE = _cel(
    "self.location == oldSelf.location",
    "location cannot be changed once set: delete the peering and create it again with the other location",
    ".location",
)
SLICES_FORM_RULE = _cel(
    "!has(self.resourceSlices) || (self.createResourceSlice && self.createVirtualNode"
    " && self.resourceSliceClass == 'default' && (!has(self.resources) || size(self.resources) == 0))",
    "resourceSlices replaces createResourceSlice, resourceSliceClass, createVirtualNode and resources:"
    " set those in each slice instead",
    ".resourceSlices",
)
SLICE_NAMES_RULE = _cel(
    "!has(self.resourceSlices) || self.resourceSlices.all(s, self.resourceSlices.exists_one(t, t.name == s.name))",
    "resourceSlices must have unique names",
    ".resourceSlices",
)
MAX_RESOURCE_SLICES = 16
# Where the provider's credential comes from: a kubeconfig Secret, or a ClusterProfile's access provider.
PROVIDER_SOURCE_RULE = _cel(
    "[has(self.remoteKubeconfigSecretRef), has(self.remoteClusterProfileRef), has(self.remoteCluster)]"
    ".filter(x, x).size() == 1",
    "set exactly one of remoteKubeconfigSecretRef, remoteClusterProfileRef and remoteCluster",
    ".remoteClusterProfileRef",
)
# The operator's cloud identity reaches a managed cluster with a token of its own: there is no kubeconfig to
# pick a context in, nor a bootstrap Secret to delete once minted (the identity mints, and renews).
CLOUD_RULE = _cel(
    "!has(self.remoteCluster) || (!has(self.remoteContext) && (!has(self.credentials) ||"
    " !has(self.credentials.deleteBootstrapSecret) || !self.credentials.deleteBootstrapSecret))",
    "remoteCluster takes neither remoteContext nor credentials.deleteBootstrapSecret: the operator's cloud"
    " identity is the credential (or mints one, with credentials.mint); there is no kubeconfig or Secret",
    ".remoteCluster",
)
# Each cloud's form of spec.remoteCluster.cluster: the pattern, and how a user writes it. The cluster's name is
# its last path segment in every form; its location (AWS region, GCP location, Azure resource group) is the
# group `location` of CLOUD_LOCATION.
CLOUD_CLUSTER_FORMS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "aws": (
            r"^arn:aws[a-z-]*:eks:[a-z0-9-]{1,32}:[0-9]{12}:cluster/[0-9A-Za-z][A-Za-z0-9_-]{0,99}$",
            "arn:aws:eks:<region>:<account>:cluster/<name>",
        ),
        # The cluster's resource ID (`az aks show --query id`, as Flux takes it). Azure compares resource IDs without
        # case, and the CLI prints `resourcegroups` for some: both spellings of the fixed segments are taken. A
        # resource group's name: letters, digits, _ - . ( ), not ending in a dot; a managed cluster's: letters,
        # digits, _ and -.
        "azure": (
            r"^/subscriptions/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            r"/resource[Gg]roups/[-A-Za-z0-9_.()]{0,89}[-A-Za-z0-9_()]"
            r"/providers/[Mm]icrosoft\.[Cc]ontainer[Ss]ervice/managed[Cc]lusters/[0-9A-Za-z][A-Za-z0-9_-]{0,62}$",
            "/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name>",
        ),
        # Flux's form for GKE: a project ID, a region or zone, a cluster name.
        "gcp": (
            r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z0-9-]{1,63}/clusters/[a-z]([a-z0-9-]{0,38}[a-z0-9])?$",
            "projects/<project>/locations/<location>/clusters/<name>",
        ),
    }
)
CLOUD_LOCATION: Mapping[str, str] = MappingProxyType(
    {
        "aws": r"^arn:[^:]+:eks:(?P<location>[^:]+):",
        "azure": r"^/subscriptions/[^/]+/resource[Gg]roups/(?P<location>[^/]+)/",
        "gcp": r"^projects/[^/]+/locations/(?P<location>[^/]+)/",
    }
)
CLOUD_PROVIDER_PATTERN = "^(" + "|".join(CLOUD_CLUSTER_FORMS) + ")$"
CLOUD_CLUSTER_RULE = _cel(
    " && ".join(
        # A CEL string literal: the pattern's backslashes escaped once more.
        f"(self.provider != '{provider}' || self.cluster.matches('{pattern.replace(chr(92), chr(92) * 2)}'))"
        for provider, (pattern, _) in CLOUD_CLUSTER_FORMS.items()
    ),
    "cluster is not in its provider's form: "
    + "; ".join(f"{provider}: {form}" for provider, (_, form) in CLOUD_CLUSTER_FORMS.items()),
    ".cluster",
)
# The endpoint and CA: both in the spec, or a Secret's.
CLOUD_ENDPOINT_RULE = _cel(
    "has(self.secretRef) ? !has(self.address) && !has(self.certificateAuthorityData)"
    " : has(self.address) && has(self.certificateAuthorityData)",
    "set address and certificateAuthorityData, or secretRef (a Secret with keys address and ca.crt) instead",
    ".address",
)
# A Secret's keys for the endpoint and CA of spec.remoteCluster.secretRef (Flux's, for its kubeConfig's).
ENDPOINT_ADDRESS_KEY, ENDPOINT_CA_KEY = "address", "ca.crt"
MAX_ENDPOINT_LENGTH = 2048  # of spec.remoteCluster.address, and of that Secret's address
BASE64_PATTERN = r"^[A-Za-z0-9+/]+={0,2}$"
# Minting needs a bootstrap kubeconfig able to create and approve CSRs; a ClusterProfile's access provider
# gives whatever identity its plugin returns, which the operator neither keeps nor renews with.
PROFILE_MINT_RULE = _cel(
    "!has(self.remoteClusterProfileRef) || !has(self.credentials) || !has(self.credentials.mint)"
    " || !self.credentials.mint",
    "credentials.mint needs remoteKubeconfigSecretRef: a ClusterProfile's access provider is not a bootstrap"
    " kubeconfig to mint with; give the access provider least-privilege rights on the provider instead",
    ".credentials.mint",
)
PROFILE_CONTEXT_RULE = _cel(
    "!has(self.remoteClusterProfileRef) || !has(self.remoteContext)",
    "remoteContext applies to remoteKubeconfigSecretRef only: a ClusterProfile's access provider has one cluster",
    ".remoteContext",
)
IN_BAND_RULE = _cel(
    "!self.authentication.inBand || self.networking.enabled",
    "authentication.inBand needs networking.enabled: in-band traffic uses the tunnel",
    ".authentication.inBand",
)


class SecretKeyRef(_Model):
    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_NAME_PATTERN,
        description="Name of a Secret in the LiqoPeering's namespace.",
    )
    key: str = Field(
        default="kubeconfig",
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Key in the Secret whose value is the provider cluster's kubeconfig.",
    )


class ClusterProfileRef(_Model):
    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_NAME_PATTERN,
        description="Name of a ClusterProfile (multicluster.x-k8s.io/v1alpha1) in the LiqoPeering's namespace.",
    )


def _ca_data_field(description: str) -> Any:
    """An optional CA certificate given inline: base64 PEM, as a kubeconfig's certificate-authority-data."""
    return Field(
        default=None,
        alias="certificateAuthorityData",
        max_length=21848,  # base64 of 16 KiB
        pattern=BASE64_PATTERN,
        description=description,
    )


class EndpointSecretRef(_Model):
    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=SECRET_NAME_PATTERN,
        description="Name of a Secret in the LiqoPeering's namespace with keys address and ca.crt.",
    )


class RemoteClusterSpec(_Model):
    """A managed provider cluster that the operator reaches with its own workload identity, not a kubeconfig."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [CLOUD_CLUSTER_RULE, CLOUD_ENDPOINT_RULE]})

    provider: str = Field(
        pattern=CLOUD_PROVIDER_PATTERN,
        max_length=16,
        description="The cloud whose identity the operator uses: aws (EKS, through EKS Pod Identity or IRSA on the"
        " operator's ServiceAccount), azure (AKS with Microsoft Entra ID, through Microsoft Entra Workload ID on"
        " the operator's ServiceAccount) or gcp (GKE, through GKE Workload Identity on the operator's"
        " ServiceAccount, or Workload Identity Federation outside GKE); its SDK makes the token in the operator,"
        " no exec plugin runs.",
    )
    cluster: str = Field(
        max_length=512,
        description="The cluster, in its provider's form: aws, its ARN arn:aws:eks:<region>:<account>:cluster/<name>"
        " (the token is made for its name, in its region); azure, its resource ID /subscriptions/<id>/resourceGroups/"
        "<group>/providers/Microsoft.ContainerService/managedClusters/<name> (`az aks show --query id`); gcp,"
        " projects/<project>/locations/<location>/clusters/<name> (its location a region or a zone).",
    )
    address: str | None = Field(
        default=None,
        max_length=MAX_ENDPOINT_LENGTH,
        pattern=r"^https://",
        description="The cluster's API server endpoint, https://... (aws: `aws eks describe-cluster`, endpoint;"
        " azure: https:// and `az aks show`, fqdn, or privateFqdn for a private cluster; gcp: https:// and"
        " `gcloud container clusters describe`, endpoint). With certificateAuthorityData, or neither and"
        " secretRef.",
    )
    certificate_authority_data: str | None = _ca_data_field(
        "The cluster's CA certificate, base64-encoded PEM (aws: `aws eks describe-cluster`,"
        " certificateAuthority.data; azure: the certificate-authority-data of the cluster's kubeconfig from"
        " `az aks get-credentials`; gcp: `gcloud container clusters describe`, masterAuth.clusterCaCertificate)."
    )
    secret_ref: EndpointSecretRef | None = Field(
        default=None,
        alias="secretRef",
        description="Secret in this namespace holding the cluster's endpoint under key address and its CA"
        " certificate (PEM) under key ca.crt, instead of address and certificateAuthorityData: no user"
        " credential is read from it. Its changes are picked up.",
    )

    @model_validator(mode="after")
    def _cluster_in_its_form(self) -> RemoteClusterSpec:
        if not re.match(CLOUD_CLUSTER_FORMS[self.provider][0], self.cluster):
            raise ValueError(CLOUD_CLUSTER_RULE["message"])
        inline = (self.address is not None, self.certificate_authority_data is not None)
        if inline != ((self.secret_ref is None,) * 2):
            raise ValueError(CLOUD_ENDPOINT_RULE["message"])
        return self

    @property
    def cluster_name(self) -> str:
        return self.cluster.rsplit("/", 1)[1]

    @property
    def location(self) -> str:
        found = re.match(CLOUD_LOCATION[self.provider], self.cluster)
        return found["location"] if found else ""


class GatewayServerSpec(_Model):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [NODE_PORT_RULE, LOAD_BALANCER_IP_RULE, LOCATION_RULE]}
    )
    location: GatewayLocation = Field(
        default="Provider",
        description="The cluster that runs the gateway server and the Service exposing it; the other cluster runs"
        " the gateway client, which dials it (liqoctl peer --gw-server-service-location). Consumer suits a provider"
        " that cannot expose a UDP endpoint. It cannot be changed once set.",
    )
    service_type: Literal["LoadBalancer", "NodePort", "ClusterIP"] = Field(
        default="LoadBalancer",
        description="Type of the Service exposing the gateway server on the cluster that runs it (location).",
    )
    port: Port = Field(default=51840, description="UDP port of the gateway server.")
    node_port: Port | None = Field(default=None, description="Fixed node port; only with serviceType NodePort.")
    load_balancer_ip: str | None = Field(
        default=None,
        alias="loadBalancerIP",
        max_length=MAX_NAME_LENGTH,
        description="Requested load balancer IP; only with serviceType LoadBalancer.",
    )

    @model_validator(mode="after")
    def _service_type_fields(self) -> GatewayServerSpec:
        if self.node_port is not None and self.service_type != "NodePort":
            raise ValueError(NODE_PORT_RULE["message"])
        if self.load_balancer_ip is not None and self.service_type != "LoadBalancer":
            raise ValueError(LOAD_BALANCER_IP_RULE["message"])
        return self


class GatewayClientSpec(_Model):
    address: str | None = Field(
        default=None,
        max_length=MAX_NAME_LENGTH,
        description="Override the address the client dials (default: the server's endpoint).",
    )
    port: Port | None = Field(
        default=None, description="Override the port the client dials (default: the server's endpoint)."
    )


class NetworkingSpec(_Model):
    enabled: bool = Field(default=True, description="Set up the WireGuard network between the clusters.")
    mtu: int = Field(default=1340, ge=576, le=9000, description="MTU of the tunnel.")
    gateway_server: GatewayServerSpec = Field(
        default_factory=GatewayServerSpec,
        description="Gateway server, created on the provider (or on the consumer: location).",
    )
    gateway_client: GatewayClientSpec = Field(
        default_factory=GatewayClientSpec,
        description="Gateway client, created on the cluster that does not run the gateway server.",
    )


class ApiServerSpec(_Model):
    """Where the consumer's Liqo reaches the provider's API server, when not where the provider's Liqo says."""

    address: str = Field(
        max_length=MAX_ENDPOINT_LENGTH,
        pattern=r"^https://",
        description="The provider's API server as the consumer reaches it, https://... (a proxy in front of it,"
        " such as Teleport, Tailscale or a load balancer), instead of the address the provider's Liqo publishes.",
    )
    certificate_authority_data: str | None = _ca_data_field(
        "The CA certificate that address serves with, base64-encoded PEM (a proxy's own). Without it, the CA the"
        " provider's Liqo publishes."
    )


class AuthenticationSpec(_Model):
    # isURL (Go's url.Parse) has no counterpart here: the API server is the judge of that one.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [PROXY_URL_RULE]})
    in_band: bool = Field(
        default=False,
        description="Reach the provider's API server through the tunnel (needs networking). Without proxyURL,"
        " this is Liqo's API server proxy on the provider, at its IP as remapped on the consumer (as liqoctl does).",
    )
    proxy_url: str | None = Field(
        default=None,
        alias="proxyURL",
        max_length=MAX_URL_LENGTH,
        description="Proxy the consumer uses to reach the provider's API server.",
    )
    api_server: ApiServerSpec | None = Field(
        default=None,
        alias="apiServer",
        description="The address and CA with which the consumer's Liqo reaches the provider's API server for this"
        " peering (its ControlPlane Identity), when they differ from those the provider's Liqo publishes. Liqo's"
        " virtual kubelet reaches the provider with the ResourceSlice's identity, which Liqo makes from what the"
        " provider publishes (its chart's apiServer.address and apiServer.ca), whatever is set here.",
    )


def _resources_field(asked: str = "the provider") -> Any:
    """``asked``: the cluster the ResourceSlice asks, which decides what an empty map gets."""
    return Field(
        default_factory=dict,
        max_length=MAX_RESOURCES,
        description=(
            f"Resources to request of {asked}, by name (cpu, memory, pods, or any extended resource such as"
            f" nvidia.com/gpu) -> quantity. Empty lets {asked} decide."
        ),
    )


class ResourceSliceSpec(_Model):
    """One ResourceSlice of several asked of the same provider."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
        description="Name of the ResourceSlice, and of the virtual node Liqo makes from it on this cluster: unique"
        " among this cluster's Nodes, so also across peerings.",
    )
    class_: str = Field(
        default="default", alias="class", min_length=1, max_length=63, description="Class of the ResourceSlice."
    )
    resources: dict[str, Quantity] = _resources_field()
    create_virtual_node: bool = Field(
        default=True, description="Have Liqo create a virtual node on this cluster from this ResourceSlice."
    )


# The reverse direction's own classes: the same fields, defaults and rules, each described from the side of
# the provider, which consumes this cluster's resources there (kubectl explain shows these descriptions).
class ReverseResourceSliceSpec(ResourceSliceSpec):
    """One ResourceSlice of several the provider asks of this cluster."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
        description="Name of the ResourceSlice, and of the virtual node Liqo makes from it on the provider: unique"
        " among the provider's Nodes, so also across the provider's peerings.",
    )
    resources: dict[str, Quantity] = _resources_field("this cluster")
    create_virtual_node: bool = Field(
        default=True, description="Have Liqo create a virtual node on the provider from this ResourceSlice."
    )


class OffloadingSpec(_Model):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [VIRTUAL_NODE_RULE, SLICES_FORM_RULE, SLICE_NAMES_RULE]}
    )
    create_resource_slice: bool = Field(
        default=True, description="Ask the provider for resources with a ResourceSlice, made on this cluster."
    )
    resource_slice_class: str = Field(
        default="default", min_length=1, max_length=63, description="Class of the ResourceSlice."
    )
    create_virtual_node: bool = Field(
        default=True, description="Have Liqo create a virtual node on this cluster from the ResourceSlice."
    )
    resources: dict[str, Quantity] = _resources_field()
    resource_slices: Sequence[ResourceSliceSpec] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_RESOURCE_SLICES,
        description="Several ResourceSlices asked of the provider, each with its own virtual node on this cluster,"
        " instead of the one that createResourceSlice, resourceSliceClass, createVirtualNode and resources"
        " describe (leave those unset). A slice dropped from the list is removed alone, with its virtual node.",
    )

    @model_validator(mode="after")
    def _virtual_node_needs_slice(self) -> OffloadingSpec:
        if self.create_virtual_node and not self.create_resource_slice:
            raise ValueError(VIRTUAL_NODE_RULE["message"])
        if self.resource_slices is not None:
            single_form_default = (
                self.create_resource_slice
                and self.create_virtual_node
                and self.resource_slice_class == "default"
                and not self.resources
            )
            if not single_form_default:
                raise ValueError(SLICES_FORM_RULE["message"])
            names = [s.name for s in self.resource_slices]
            if len(set(names)) != len(names):
                raise ValueError(SLICE_NAMES_RULE["message"])
        return self


class CredentialsSpec(_Model):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [DELETE_BOOTSTRAP_RULE, LIFETIME_RULE]})
    mint: bool = Field(
        default=False,
        description="Mint a least-privilege identity for this consumer on the provider, as `liqoctl generate"
        " peering-user` does (a client certificate through a CSR, bound to Liqo's peering-user roles), with the"
        " kubeconfig in remoteKubeconfigSecretRef (the bootstrap); keep its kubeconfig in a Secret owned by"
        " this LiqoPeering and use only that one. Deleting the LiqoPeering revokes it. Needs the operator's chart"
        " installed with credentialsMinting=true.",
    )
    delete_bootstrap_secret: bool = Field(
        default=False,
        description="Delete the bootstrap Secret once the minted credential is in use (needs mint). Without it,"
        " the operator cannot renew the minted certificate: put a bootstrap Secret back before it expires.",
    )
    certificate_lifetime: str | None = Field(
        default=None,
        pattern=DURATION_PATTERN,
        max_length=MAX_DURATION_LENGTH,
        description="Requested lifetime of the minted certificate, 10m to 87600h, such as 720h (needs mint;"
        " default: the provider signer's own, a year unless its kube-controller-manager says otherwise). It is"
        " renewed at two thirds of its lifetime, with the bootstrap Secret.",
    )

    key_algorithm: Literal["Auto", "Ed25519", "RSA"] = Field(
        default="Auto",
        description="The minted user's key: Ed25519, or RSA (2048 bits) for a provider whose Liqo runs in TLS"
        " compatibility mode (its chart's authentication.tlsCompatibilityMode), where some TLS stacks take no"
        " Ed25519. Auto reads that mode from the provider's liqo-controller-manager, as `liqoctl generate"
        " peering-user` does, and takes Ed25519 when it cannot. Changing it to the other algorithm mints the"
        " user again.",
    )

    @model_validator(mode="after")
    def _needs_mint(self) -> CredentialsSpec:
        if self.delete_bootstrap_secret and not self.mint:
            raise ValueError(DELETE_BOOTSTRAP_RULE["message"])
        if self.certificate_lifetime is not None and (
            not self.mint
            or not MIN_CERTIFICATE_LIFETIME_SECONDS
            <= parse_duration(self.certificate_lifetime)
            <= MAX_CERTIFICATE_LIFETIME_SECONDS
        ):
            raise ValueError(LIFETIME_RULE["message"])
        return self

    @property
    def lifetime_seconds(self) -> int | None:
        return None if self.certificate_lifetime is None else int(parse_duration(self.certificate_lifetime))


def reserved_key(key: str) -> bool:
    """Whether a label or annotation key is Liqo's or the operator's (the RESERVED_*_RULEs)."""
    return bool(re.search(RESERVED_KEY_PATTERN, key)) or key in RESERVED_KEYS


# A label value, as Kubernetes takes it (apimachinery's IsValidLabelValue).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]
# Bounds the CEL rule's cost, which the API server estimates from the largest map the schema allows.
MAX_COMMON_KEYS = 64


class CommonMetadata(_Model):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [RESERVED_LABELS_RULE, RESERVED_ANNOTATIONS_RULE]}
    )
    labels: Annotated[
        dict[str, LabelValue],
        Field(max_length=MAX_COMMON_KEYS),
    ] = Field(
        default_factory=dict,
        description="Labels put on every object the peering creates on both clusters (as liqoctl's"
        " --global-labels), such as a cost centre or an owner. Changing them updates those objects in place.",
    )
    annotations: Annotated[
        dict[str, Annotated[str, Field(max_length=MAX_ANNOTATION_VALUE_LENGTH)]],
        Field(max_length=MAX_COMMON_KEYS),
    ] = Field(
        default_factory=dict,
        description="Annotations put on every object the peering creates on both clusters (as liqoctl's"
        " --global-annotations). Changing them updates those objects in place.",
    )

    @model_validator(mode="after")
    def _not_reserved(self) -> CommonMetadata:
        if any(reserved_key(k) for k in self.labels):
            raise ValueError(RESERVED_LABELS_RULE["message"])
        if any(reserved_key(k) for k in self.annotations):
            raise ValueError(RESERVED_ANNOTATIONS_RULE["message"])
        return self


class DeletionSpec(_Model):
    delete_tenant_namespaces: bool = Field(
        default=False,
        description="When the LiqoPeering is deleted, delete the tenant namespaces on both clusters too, once"
        " Liqo's objects in them are gone (as liqoctl unpeer --delete-namespaces). Default: they stay.",
    )


class ReverseOffloadingSpec(OffloadingSpec):
    create_resource_slice: bool = Field(
        default=True,
        description="Have the provider ask this cluster for resources with a ResourceSlice, made on the provider.",
    )
    create_virtual_node: bool = Field(
        default=True, description="Have Liqo create a virtual node on the provider from the ResourceSlice."
    )
    resources: dict[str, Quantity] = _resources_field("this cluster")
    resource_slices: Sequence[ReverseResourceSliceSpec] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_RESOURCE_SLICES,
        description="Several ResourceSlices the provider asks of this cluster, each with its own virtual node on"
        " the provider, instead of the one that createResourceSlice, resourceSliceClass, createVirtualNode and"
        " resources describe (leave those unset). A slice dropped from the list is removed alone, with its"
        " virtual node.",
    )


class ReverseSpec(_Model):
    offloading: ReverseOffloadingSpec = Field(
        default_factory=ReverseOffloadingSpec,
        description="What the provider asks this cluster for in the reverse direction (only with bidirectional):"
        " a ResourceSlice made on the provider, and from it a virtual node on the provider. Same fields and"
        " defaults as spec.offloading, set apart: the two directions ask different clusters.",
    )


class LiqoPeeringTemplate(_Model):
    """Everything of a LiqoPeering spec but the Secret reference: what a LiqoPeeringSet stamps out."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [IN_BAND_RULE]})
    remote_context: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Context to use inside that kubeconfig (default: its current context).",
    )
    timeout: str = Field(
        default="5m",
        pattern=DURATION_PATTERN,
        max_length=MAX_DURATION_LENGTH,
        description="How long establishing may take before the peering reports timeout, such as 90s, 10m or 1h.",
    )
    liqo_namespace: str = Field(
        default="liqo", pattern=DNS_LABEL_PATTERN, max_length=63, description="Liqo's namespace on this cluster."
    )
    remote_liqo_namespace: str = Field(
        default="liqo", pattern=DNS_LABEL_PATTERN, max_length=63, description="Liqo's namespace on the provider."
    )
    skip_validation: bool = Field(
        default=False, description="Skip the checks that Liqo's gateway templates exist before networking."
    )
    allow_liqo_version_skew: bool = Field(
        default=False,
        description="Peer even when the two clusters run different minor versions of Liqo, which Liqo does not"
        " support (status.versions shows both; the LiqoVersionSkew condition says so). Without it such a peering"
        " does not start; one that was Ready before the versions diverged carries on either way.",
    )
    networking: NetworkingSpec = Field(default_factory=NetworkingSpec, description="Stage 1: networking.")
    authentication: AuthenticationSpec = Field(
        default_factory=AuthenticationSpec, description="Stage 2: authentication."
    )
    offloading: OffloadingSpec = Field(default_factory=OffloadingSpec, description="Stage 3: offloading.")
    credentials: CredentialsSpec = Field(
        default_factory=CredentialsSpec,
        description="The provider credential: the Secret's kubeconfig as it is, or a least-privilege one"
        " minted from it.",
    )
    bidirectional: bool = Field(
        default=False,
        description="Peer in both directions: the provider also consumes this cluster's resources, over the same"
        " network (Liqo's bidirectional peering). Turning it off removes the reverse direction only.",
    )
    reverse: ReverseSpec = Field(
        default_factory=ReverseSpec,
        description="The reverse direction, where the provider consumes this cluster's resources; used only when"
        " bidirectional is true.",
    )
    common_metadata: CommonMetadata = Field(
        default_factory=CommonMetadata,
        description="Labels and annotations for every object the peering creates on both clusters. Liqo's and"
        " the operator's own keys are refused, and theirs win on every object.",
    )
    deletion: DeletionSpec = Field(default_factory=DeletionSpec, description="What unpeering removes.")

    @model_validator(mode="after")
    def _in_band_needs_networking(self) -> LiqoPeeringTemplate:
        if self.authentication.in_band and not self.networking.enabled:
            raise ValueError(IN_BAND_RULE["message"])
        return self

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout)


class LiqoPeeringSpec(LiqoPeeringTemplate):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                IN_BAND_RULE,
                PROVIDER_SOURCE_RULE,
                PROFILE_MINT_RULE,
                PROFILE_CONTEXT_RULE,
                CLOUD_RULE,
            ]
        }
    )
    remote_kubeconfig_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Secret in this namespace holding the provider cluster's kubeconfig (self-contained). Set"
        " exactly one of this, remoteClusterProfileRef and remoteCluster.",
    )
    remote_cluster_profile_ref: ClusterProfileRef | None = Field(
        default=None,
        description="ClusterProfile (multicluster.x-k8s.io/v1alpha1, SIG-Multicluster's cluster inventory) in this"
        " namespace that describes the provider: the operator reaches it through the first access provider of its"
        " provider file (--clusterprofile-provider-file) that the ClusterProfile offers, and does not peer while"
        " its ControlPlaneHealthy condition is not True. Set exactly one of this, remoteKubeconfigSecretRef and"
        " remoteCluster; not with credentials.mint or remoteContext.",
    )
    remote_cluster: RemoteClusterSpec | None = Field(
        default=None,
        description="A managed provider cluster (EKS) that the operator reaches with its own cloud workload"
        " identity: no kubeconfig, no credential in a Secret. Set exactly one of this,"
        " remoteKubeconfigSecretRef and remoteClusterProfileRef; not with remoteContext. With credentials.mint, the"
        " identity mints the least-privilege peering user (and renews it).",
    )

    @model_validator(mode="after")
    def _one_provider_source(self) -> LiqoPeeringSpec:
        sources = (self.remote_kubeconfig_secret_ref, self.remote_cluster_profile_ref, self.remote_cluster)
        if sum(source is not None for source in sources) != 1:
            raise ValueError(PROVIDER_SOURCE_RULE["message"])
        if self.remote_cluster is not None and (
            self.credentials.delete_bootstrap_secret or self.remote_context is not None
        ):
            raise ValueError(CLOUD_RULE["message"])
        if self.remote_cluster_profile_ref is not None:
            if self.credentials.mint:
                raise ValueError(PROFILE_MINT_RULE["message"])
            if self.remote_context is not None:
                raise ValueError(PROFILE_CONTEXT_RULE["message"])
        return self

    @property
    def secret_ref(self) -> SecretKeyRef:
        """The kubeconfig Secret, for what only a Secret's peering does (minting): the rules above make it set
        with credentials.mint."""
        if self.remote_kubeconfig_secret_ref is None:
            raise ValueError("this LiqoPeering reaches its provider without a kubeconfig Secret")
        return self.remote_kubeconfig_secret_ref


PeerStatus = Literal["no_peers", "establishing", "ready", "error", "timeout"]
ModuleHealth = Literal["Healthy", "Unhealthy", "Disabled"]


class Condition(_Model):
    """A metav1.Condition."""

    type: str = Field(description="Condition type, such as Ready.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(default=None, description="Generation the condition was set for.")
    last_transition_time: str = Field(description="When the status last changed (RFC 3339).")
    reason: str = Field(description="CamelCase reason.")
    message: str = Field(default="", description="What happened and, on failure, what to do.")


class LiqoCondition(_Model):
    """A ForeignCluster condition, copied verbatim (Liqo's own types and statuses)."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(description="Liqo condition type, such as NetworkConnectionStatus.")
    status: str = Field(description="Liqo status: None, Pending, Established, Error, Ready, NotReady, SomeNotReady.")
    last_transition_time: str | None = Field(default=None, description="When Liqo last changed it.")
    reason: str | None = Field(default=None, description="Liqo's reason.")
    message: str | None = Field(default=None, description="Liqo's message.")


class ModuleMirror(_Model):
    enabled: bool = Field(default=False, description="Whether Liqo has the module enabled.")
    health: ModuleHealth = Field(default="Disabled", description="Healthy, Unhealthy or Disabled, as liqoctl info.")
    conditions: list[LiqoCondition] = Field(default_factory=list, description="Liqo's conditions, verbatim.")


class ModuleMirrors(_Model):
    networking: ModuleMirror = Field(default_factory=ModuleMirror, description="Networking module.")
    authentication: ModuleMirror = Field(default_factory=ModuleMirror, description="Authentication module.")
    offloading: ModuleMirror = Field(default_factory=ModuleMirror, description="Offloading module.")


class ForeignClusterMirror(_Model):
    role: str | None = Field(default=None, description="Consumer, Provider, ConsumerAndProvider or Unknown.")
    api_server_url: str | None = Field(default=None, alias="apiServerUrl", description="Provider API server.")
    modules: ModuleMirrors = Field(default_factory=ModuleMirrors, description="Liqo's modules, as liqoctl info.")
    conditions: list[LiqoCondition] = Field(
        default_factory=list, description="The ForeignCluster's own conditions (such as APIServerStatus), verbatim."
    )


class CredentialsStatus(_Model):
    secret_name: str = Field(description="Secret in this namespace holding the minted kubeconfig.")
    user: str = Field(description="The minted identity: the certificate's common name on the provider.")
    not_after: str = Field(description="When the minted certificate expires (RFC 3339).")
    renew_at: str = Field(description="When the operator renews it, with the bootstrap Secret (RFC 3339).")


class CertificateStatus(_Model):
    held_by: Literal["consumer", "provider"] = Field(
        description="The cluster whose Liqo uses the identity: consumer, or provider for the reverse direction of a"
        " bidirectional peering. The other cluster issued it."
    )
    type: Literal["ControlPlane", "ResourceSlice"] = Field(
        description="The identity: ControlPlane (Liqo's control plane on the other cluster) or ResourceSlice (the"
        " virtual kubelet of that slice)."
    )
    resource_slice: str | None = Field(default=None, description="The ResourceSlice, for a ResourceSlice identity.")
    not_before: str = Field(description="When the certificate became valid (RFC 3339).")
    not_after: str = Field(description="When the certificate expires (RFC 3339).")
    renew_at: str = Field(
        description="When it is due for renewal: two thirds into its lifetime, where Liqo's renewer asks for a new"
        " one (RFC 3339)."
    )


class ClusterVersions(_Model):
    liqo: str | None = Field(
        default=None,
        description="Liqo's version, from the label app.kubernetes.io/version of its cluster-ID ConfigMap, such as"
        " v1.2.0; for a development build, what the API's shape tells, such as"
        " unknown, v1.2 or newer (development build <commit>).",
    )
    kubernetes: str | None = Field(
        default=None, description="The API server's version (GET /version), such as v1.35.0."
    )


class PeeringVersions(_Model):
    consumer: ClusterVersions = Field(default_factory=ClusterVersions, description="This cluster.")
    provider: ClusterVersions = Field(default_factory=ClusterVersions, description="The provider cluster.")


class ClusterCIDRs(_Model):
    pod_cidrs: list[str] = Field(
        default_factory=list, alias="podCIDRs", description="The cluster's pod CIDRs (Liqo's Configuration spec)."
    )
    external_cidrs: list[str] = Field(
        default_factory=list, alias="externalCIDRs", description="The cluster's external CIDRs."
    )
    remapped_pod_cidrs: list[str] = Field(
        default_factory=list,
        alias="remappedPodCIDRs",
        description="What the other cluster remaps the pod CIDRs to, when they clash with its own (the"
        " Configuration's status); absent until Liqo has written it.",
    )
    remapped_external_cidrs: list[str] = Field(
        default_factory=list,
        alias="remappedExternalCIDRs",
        description="What the other cluster remaps the external CIDRs to.",
    )


class NetworkStatus(_Model):
    consumer: ClusterCIDRs | None = Field(
        default=None, description="This cluster's CIDRs, as the provider's Configuration describes them."
    )
    provider: ClusterCIDRs | None = Field(
        default=None, description="The provider's CIDRs, as this cluster's Configuration describes them."
    )


class GatewayStatus(_Model):
    server: GatewayLocation = Field(
        description="The cluster whose gateway serves; the other cluster's gateway client dials it."
    )
    addresses: list[str] = Field(
        default_factory=list,
        description="The addresses the gateway client dials (its GatewayClient's endpoint: the server's published"
        " one, or spec.networking.gatewayClient's override), else those the GatewayServer publishes.",
    )
    port: int | None = Field(default=None, description="The port the gateway client dials (the first, with several).")
    ports: list[int] = Field(
        default_factory=list,
        description="Every port the gateway client dials, when there are several (Liqo after v1.2.0 may publish a"
        " list, one per WireGuard interface).",
    )
    protocol: str | None = Field(default=None, description="The tunnel's transport protocol, such as UDP.")


class ResourceSliceCondition(_Model):
    """A ResourceSlice condition, as Liqo wrote it."""

    type: str = Field(description="Authentication or Resources.")
    status: str = Field(description="Accepted or Denied.")
    reason: str | None = Field(default=None, description="Liqo's reason, such as ResourceSliceResourcesAccepted.")
    message: str | None = Field(default=None, description="Liqo's message.")


class ResourceSliceStatus(_Model):
    name: str = Field(description="The ResourceSlice's name, in the tenant namespace.")
    action: Literal["Consuming", "Providing"] = Field(
        description="Consuming: this cluster asks the provider for resources; Providing: the reverse direction of"
        " a bidirectional peering, the provider asking this cluster (as liqoctl info says it)."
    )
    class_: str | None = Field(default=None, alias="class", description="The ResourceSlice's class.")
    requested: dict[str, str] = Field(
        default_factory=dict,
        description="The resources asked for (empty lets the cluster asked decide: the provider, or this cluster"
        " for a Providing slice).",
    )
    granted: dict[str, str] = Field(
        default_factory=dict,
        description="The resources granted (the slice's status), by the provider, or by this cluster for a"
        " Providing slice.",
    )
    accepted: bool = Field(
        description="Whether the cluster asked (the provider, or this cluster for a Providing slice) accepted it:"
        " Liqo has written its conditions and each says Accepted."
    )
    conditions: list[ResourceSliceCondition] = Field(
        default_factory=list, description="Liqo's conditions (Authentication, Resources) with its reasons."
    )


class VirtualNodeStatus(_Model):
    name: str = Field(description="The virtual node's name (its VirtualNode and Node).")
    resource_slice: str | None = Field(default=None, description="The ResourceSlice it was made from.")
    ready: bool = Field(description="Whether its Node is Ready.")
    message: str | None = Field(default=None, description="Why it is not Ready.")
    resources: dict[str, str] = Field(
        default_factory=dict, description="Its resources (the VirtualNode's spec.resourceQuota.hard)."
    )


class ApiServerStatus(_Model):
    address: str | None = Field(
        default=None, description="The provider's API server address in the ControlPlane Identity."
    )
    proxy_url: str | None = Field(
        default=None, alias="proxyURL", description="The proxy Liqo reaches it through, when there is one."
    )


class LiqoPeeringStatus(_Model):
    peer_status: PeerStatus | None = Field(default=None, description="no_peers, establishing, ready, error or timeout.")
    observed_generation: int | None = Field(default=None, description="The generation this status describes.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled, NetworkReady, AuthenticationReady, OffloadingReady;"
        " CredentialsMinted with spec.credentials.mint; with bidirectional, ReverseAuthenticationReady and"
        " ReverseOffloadingReady too; LiqoVersionSkew while the clusters run different minor versions of Liqo,"
        " LiqoVersionUntested while either runs a version this operator was not tested with; CertificatesValid"
        " once Liqo has issued an identity's certificate (False when one is late for renewal or expired).",
    )
    local_cluster_id: str | None = Field(default=None, alias="localClusterID", description="This cluster's ID.")
    remote_cluster_id: str | None = Field(
        default=None, alias="remoteClusterID", description="The provider's cluster ID."
    )
    started_at: str | None = Field(default=None, description="When establishing started (RFC 3339).")
    ready_at: str | None = Field(default=None, description="When the peering first became ready (RFC 3339).")
    stage: str | None = Field(
        default=None,
        description="Where the peering is, in a few words (the Stage column): ready, or a step and its state,"
        " such as networking: waiting, authentication: error, discovery: error (the Secret, the kubeconfig or"
        " Liqo on either cluster) or unpeering: error. The conditions hold the details.",
    )
    foreign_cluster: ForeignClusterMirror | None = Field(
        default=None, description="Mirror of Liqo's ForeignCluster for the provider."
    )
    credentials: CredentialsStatus | None = Field(
        default=None, description="The minted provider credential (spec.credentials.mint), once minted."
    )
    certificates: list[CertificateStatus] | None = Field(
        default=None,
        description="The certificate of each identity Liqo issued for the peering, in either direction: when it"
        " expires and when it is due for renewal.",
    )
    versions: PeeringVersions | None = Field(
        default=None, description="Which Liqo and Kubernetes each cluster runs, as last discovered."
    )
    network: NetworkStatus | None = Field(
        default=None,
        description="Each cluster's pod and external CIDRs and what the other cluster remaps them to, from Liqo's"
        " network Configurations (absent without networking).",
    )
    gateway: GatewayStatus | None = Field(
        default=None, description="The tunnel's gateways: which cluster serves, and the endpoint the client dials."
    )
    resource_slices: list[ResourceSliceStatus] | None = Field(
        default=None,
        description="Each ResourceSlice of the peering, in either direction: requested and granted resources, and"
        " whether the cluster asked accepted it, with Liqo's reasons.",
    )
    virtual_nodes: list[VirtualNodeStatus] | None = Field(
        default=None, description="Each virtual node made for the provider on this cluster, and whether it is Ready."
    )
    api_server: ApiServerStatus | None = Field(
        default=None, description="The provider's API server address (and proxy) the ControlPlane Identity uses."
    )


def parse_spec(spec: dict[str, Any]) -> LiqoPeeringSpec:
    """Validate a LiqoPeering spec as the API server would (for input that bypassed admission)."""
    return LiqoPeeringSpec.model_validate(spec)
