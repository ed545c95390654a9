"""liqo-standin: a small test double for Liqo's controllers and gateway pods, watching two clusters.

It is NOT Liqo. It reacts to the objects a peering creates (by liqoctl, or by the operator) the way Liqo
v1.2's controllers would, so the operator can be tested end to end on two local API servers without pods.
Field names and formats follow Liqo's sources (apis/, pkg/liqo-controller-manager/, pkg/gateway/).

What it does, on each cluster, for the other one (the "peer"):
- Configuration: status.conditions[NetworkCIDRsConfigured=True, observedGeneration=generation],
  status.remote = spec.remote (no remapping).
- Secret liqo-nonce (label liqo.io/nonce): data.nonce = base64 text of 64 random bytes.
- Secret liqo-signed-nonce (label liqo.io/signed-nonce): data.signedNonce = Ed25519 signature of data.nonce
  with the cluster key (Secret <liqo ns>/authentication-keys, data.privateKey PKCS#8 PEM).
- Tenant: verifies the handshake (nonce signature, CSR CN=<consumer ID>/O=liqo.io for spec.publicKey) unless
  authzPolicy is TolerateNoHandshake; finds/creates the tenant namespace; issues a client certificate
  through a real CertificateSigningRequest (signer kubernetes.io/kube-apiserver-client, approved here,
  signed by kube-controller-manager); binds ClusterRoles labelled app.kubernetes.io/name=remote-controlplane
  to User <consumer ID> in the tenant namespace (RoleBinding liqo-binding-<role>); sets
  status.tenantNamespace and status.authParams{ca, signedCRT, apiServer, proxyURL}.
- Identity: Secret kubeconfig-<identity> (data.kubeconfig built from spec.authParams + the cluster key,
  labels liqo.io/remote-cluster-id, liqo.io/identity-type, annotation liqo.io/remote-tenant-namespace) and
  status.kubeconfigSecretRef.name.
- GatewayServer/GatewayClient: Secret gw-<name> (x25519 pair, raw 32 bytes each) unless spec.secretRef is
  given, status.secretRef, Deployment gw-<name> made Ready without a kubelet, GatewayServer status.endpoint
  {addresses: [spec.endpoint.loadBalancerIP or 127.0.0.1], port, protocol: UDP}.
- Connection gw-<gateway> per gateway (label liqo.io/remote-cluster-id, spec.type Server|Client,
  gatewayRef), once the gateway is Ready and a PublicKey for the peer exists on its cluster: status.value
  Connecting; Connected when the peer cluster has its gateway too and each side holds the other's real
  public key; when the keys do not match, Connecting for 10 s, then Error. Deleted when the gateway goes.
- ResourceSlice (consumer): status.conditions Authentication/Resources = Accepted|Denied (Authentication
  needs a Tenant for the consumer on the provider, authenticated, Active) and status.resources =
  spec.resources (or a default of cpu 4, memory 8Gi, pods 110), once a ControlPlane kubeconfig Secret for
  the provider exists.
- VirtualNode (same name/namespace as an accepted slice annotated liqo.io/create-virtual-node=true):
  conditions VirtualKubelet/Node = Running, plus a Node of the same name labelled liqo.io/type=virtual-node,
  Ready via a heartbeat. Both removed when the slice goes or is no longer accepted.
- ForeignCluster <peer ID>: created when objects for the peer appear; status.role,
  status.modules.{networking, authentication,offloading}.{enabled, conditions}, apiServerUrl,
  tenantNamespace{local, remote}, conditions [APIServerStatus], computed from the objects like
  foreigncluster-controller/status.go.

Limits (what it does NOT do):
- no data plane: no WireGuard tunnel, no gateway or fabric pods, no routes or firewall rules; "Connected"
  only means both sides created gateways and exchanged the right public keys;
- no IPAM: no CIDR remapping, no IP allocation (ipam.liqo.io IP objects are ignored); Configuration status
  echoes the spec;
- no pods run: gateway Deployments are made Ready by writing Pod/Deployment status; no virtual kubelet, so
  nothing is scheduled on or offloaded to the virtual Node;
- no crd-replicator: the ResourceSlice is not copied to the provider; the stand-in writes its status on the
  consumer directly, reading the provider's Tenant through its own credentials;
- no ResourceSlice certificates (status.authParams of the slice), no NamespaceOffloading/NamespaceMap
  handling, no certificate renewal, no Tenant Cordoned/Drained handling beyond denying new slices, no
  webhooks (nothing validates or defaults what you create), no finalizers (deletion is immediate);
- ForeignCluster conditions are computed, not probed (APIServerStatus is Established whenever a URL is
  known).

Fault injection, per cluster and changeable while running: ConfigMap `liqo-standin-faults` in the Liqo
namespace. A knob applies to objects on that cluster; when unset there, the other cluster's value applies.
- `delay: "<seconds>"`: react to each object only that long after first seeing it;
- `resourceslice: Denied` (Resources=Denied) | `DefaultClassDisabled` (Resources=Denied, the reason of a provider
  that turned the `default` class off) | `AuthDenied` (Authentication=Denied) | `Accepted` (default);
- `connection: Error` | `Connecting` (stuck) | `Never` (no Connection at all; an existing one is removed);
- `tenant: Never`: Tenants never get a status (authentication hangs);
- `virtualnode: Never`: no VirtualNode/Node for accepted slices (existing ones are removed);
- `paused: "true"`: do nothing on that cluster (Liqo's controllers down).
Knobs take effect at the next pass. To know they have, set annotation `liqo-standin/request` to a new
value and wait until `liqo-standin/applied` equals it (`StandInProcess.set_faults` does so).
"Liqo missing on one side": liqo_env.uninstall_liqo(); the stand-in then skips that cluster.

Run: `python -m testenv.standin --consumer-kubeconfig A --provider-kubeconfig B [--liqo-namespace liqo]`, or
in-process with `StandIn(Kube.from_kubeconfig(A), Kube.from_kubeconfig(B)).start()` / `.stop()`.

"""

from testenv.kube import Kube

from .standin import FAULTS_APPLIED, FAULTS_CONFIGMAP, FAULTS_REQUEST, StandIn

__all__ = ["FAULTS_APPLIED", "FAULTS_CONFIGMAP", "FAULTS_REQUEST", "Kube", "StandIn"]
