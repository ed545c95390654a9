"""The stand-in's reconcile loop. See the package docstring for what it does and does not do."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from testenv import kube as k
from testenv.kube import Kube, KubeError, Obj

log = logging.getLogger("liqo_standin")

FAULTS_CONFIGMAP = "liqo-standin-faults"
# A test that must know its knobs are in effect sets REQUEST on the faults ConfigMap; the stand-in copies it
# to APPLIED when a pass loads it. Passes run one at a time, so by then no pass that missed the knobs is
# still writing.
FAULTS_REQUEST = "liqo-standin/request"
FAULTS_APPLIED = "liqo-standin/applied"
MANAGER = "liqo-standin"
MANAGED = {"app.kubernetes.io/managed-by": MANAGER}

# Liqo label/annotation keys (pkg/consts).
REMOTE = "liqo.io/remote-cluster-id"
TENANT_NS = "liqo.io/tenant-namespace"
NONCE = "liqo.io/nonce"
SIGNED_NONCE = "liqo.io/signed-nonce"
IDENTITY_TYPE = "liqo.io/identity-type"
REMOTE_TENANT_NS = "liqo.io/remote-tenant-namespace"
GW_RESOURCE = "networking.liqo.io/gateway-resource"
CREATE_VN = "liqo.io/create-virtual-node"
GW_POD = "liqo-standin/gateway"
# The Pods this process plays (gateways, the virtual kubelet) name a scheduler that does not exist: on a
# cluster with real nodes, kube-scheduler would otherwise bind them and a kubelet try to run their images.
SCHEDULER = "liqo-standin"

DEFAULT_SLICE_RESOURCES = {"cpu": "4", "memory": "8Gi", "pods": "110"}
NODE_HEARTBEAT = 10.0
MISMATCH_GRACE = 10.0  # seconds a gateway with the wrong peer key stays Connecting before Error


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owner(obj: Obj, controller: bool = True) -> Obj:
    md = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": md["name"],
        "uid": md["uid"],
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def labels(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def merge_conditions(old: list[Obj] | None, new: list[Obj]) -> list[Obj]:
    """Keep lastTransitionTime when a condition's status did not change (so status writes are idempotent)."""
    prev = {c.get("type"): c for c in old or []}
    out = []
    for c in new:
        p = prev.get(c["type"])
        same = p is not None and p.get("status") == c["status"] and p.get("lastTransitionTime")
        out.append({**c, "lastTransitionTime": p["lastTransitionTime"] if same and p else now()})
    return out


def strip_none(v: Any) -> Any:
    if isinstance(v, dict):
        return {a: strip_none(b) for a, b in v.items() if b is not None}
    if isinstance(v, list):
        return [strip_none(x) for x in v]
    return v


@dataclass
class Side:
    """One cluster as seen by the stand-in."""

    name: str
    kube: Kube
    ns: str
    cluster_id: str | None = None
    faults: dict[str, str] = field(default_factory=dict)
    snap: dict[str, list[Obj]] = field(default_factory=dict)

    def items(self, what: str) -> list[Obj]:
        return self.snap.get(what, [])

    def for_peer(self, what: str, peer_id: str) -> list[Obj]:
        return [o for o in self.items(what) if labels(o).get(REMOTE) == peer_id]


# The virtual kubelet's Pods (Liqo's VirtualKubeletLabels); Liqo judges a virtual node by their readiness.
VK_POD = "offloading.liqo.io/component=virtual-kubelet"
# What a pass reads on each side: name -> (kind, label selector).
SNAPSHOT: dict[str, tuple[k.Res, str | None]] = {
    "configurations": (k.CONFIGURATION, None),
    "gatewayservers": (k.GATEWAYSERVER, None),
    "gatewayclients": (k.GATEWAYCLIENT, None),
    "publickeys": (k.PUBLICKEY, None),
    "connections": (k.CONNECTION, None),
    "tenants": (k.TENANT, None),
    "identities": (k.IDENTITY, None),
    "resourceslices": (k.RESOURCESLICE, None),
    "virtualnodes": (k.VIRTUALNODE, None),
    "nonces": (k.SECRET, NONCE),
    "signednonces": (k.SECRET, SIGNED_NONCE),
    "kubeconfigs": (k.SECRET, f"{IDENTITY_TYPE}=ControlPlane"),
    "tenantnamespaces": (k.NAMESPACE, f"{TENANT_NS}=true"),
    "vnodes": (k.NODE, "liqo.io/type=virtual-node"),
    "vkpods": (k.POD, VK_POD),
}
# Watched kinds (a change wakes the loop up); the periodic resync covers the rest.
WATCHED: list[tuple[k.Res, str | None]] = [
    *SNAPSHOT.values(),
    (k.CONFIGMAP, None),  # the faults ConfigMap
    (k.CSR, None),
    (k.POD, GW_POD),
    (k.DEPLOYMENT, GW_POD),
]


class StandIn:
    """Does, for two clusters, what Liqo's controllers and gateway pods would do. start()/stop() or run()."""

    def __init__(self, consumer: Kube, provider: Kube, liqo_namespace: str = "liqo", resync: float = 5.0) -> None:
        self.sides = [Side("consumer", consumer, liqo_namespace), Side("provider", provider, liqo_namespace)]
        self.resync = resync
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._first_seen: dict[str, float] = {}
        self._next_due: float | None = None
        self._heartbeats: dict[str, float] = {}
        self._mismatch_since: dict[str, float] = {}
        self._threads: list[threading.Thread] = []
        self.passes = 0

    # --- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        for side in self.sides:
            for res, selector in WATCHED:
                t = threading.Thread(
                    target=self._watch,
                    args=(side, res, selector),
                    daemon=True,
                    name=f"watch-{side.name}-{res.plural}",
                )
                t.start()
                self._threads.append(t)
        loop = threading.Thread(target=self.run, daemon=True, name="standin-loop")
        loop.start()
        self._threads.append(loop)

    def request_stop(self) -> None:
        """Ask the loop to end (safe from a signal handler)."""
        self._stop.set()
        self._wake.set()

    def wait(self) -> None:
        """Block until request_stop()/stop()."""
        while not self._stop.wait(1):
            pass

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            if t.name == "standin-loop":
                t.join(timeout=30)
        self._threads.clear()

    def run(self) -> None:
        """The loop: a full, idempotent pass on every wake-up (watch event, delay expiry) or resync."""
        while not self._stop.is_set():
            self._next_due = None
            try:
                self.reconcile_once()
            except Exception:
                log.exception("pass failed")
            timeout = self.resync
            if self._next_due is not None:
                timeout = max(0.05, min(timeout, self._next_due - time.monotonic()))
            self._wake.wait(timeout)
            self._wake.clear()
            time.sleep(0.1)  # coalesce bursts of watch events into one pass

    def _watch(self, side: Side, res: k.Res, selector: str | None) -> None:
        k.follow(side.kube, res, selector, self._wake.set, self._stop)

    # --- one pass ----------------------------------------------------------------------------------------
    def reconcile_once(self) -> None:
        self.passes += 1
        for side in self.sides:
            self._load(side)
        for side, peer in ((self.sides[0], self.sides[1]), (self.sides[1], self.sides[0])):
            if side.cluster_id is None or self._fault(side, peer, "paused") == "true":
                continue
            steps: list[Callable[[Side, Side], None]] = [
                self._configurations,
                self._nonces,
                self._signed_nonces,
                self._tenants,
                self._identities,
                self._gateways,
                self._connections,
                self._resourceslices,
                self._virtualnodes,
                self._foreigncluster,
            ]
            for step in steps:
                try:
                    step(side, peer)
                except Exception as e:
                    log.warning("%s on %s: %s", step.__name__.strip("_"), side.name, e)

    def _load(self, side: Side) -> None:
        kc = side.kube
        try:
            cms = kc.list(k.CONFIGMAP, side.ns, "app.kubernetes.io/name=clusterid-configmap")
            side.cluster_id = (cms[0].get("data") or {}).get("CLUSTER_ID") if cms else None
            cm = kc.get(k.CONFIGMAP, FAULTS_CONFIGMAP, side.ns)
            side.faults = (cm or {}).get("data") or {}
            notes = ((cm or {}).get("metadata") or {}).get("annotations") or {}
            if notes.get(FAULTS_REQUEST) and notes.get(FAULTS_REQUEST) != notes.get(FAULTS_APPLIED):
                patch = {"metadata": {"annotations": {FAULTS_APPLIED: notes[FAULTS_REQUEST]}}}
                kc.patch(k.CONFIGMAP, FAULTS_CONFIGMAP, patch, side.ns)
            side.snap = {name: kc.list(res, selector=sel) for name, (res, sel) in SNAPSHOT.items()}
        except Exception as e:
            log.warning("cannot read %s: %s", side.name, e)
            side.cluster_id = None

    def _fault(self, side: Side, peer: Side, key: str) -> str:
        """A fault knob: the object's own cluster wins, else the other cluster's ConfigMap."""
        return (side.faults.get(key) or peer.faults.get(key) or "").strip()

    def _due(self, side: Side, peer: Side, obj: Obj) -> bool:
        """The `delay` fault: react to an object only `delay` seconds after first seeing it."""
        try:
            delay = float(self._fault(side, peer, "delay") or 0)
        except ValueError:
            delay = 0
        key = f"{side.name}/{obj['metadata']['uid']}"  # list items of built-in kinds carry no "kind"
        first = self._first_seen.setdefault(key, time.monotonic())
        due_at = first + delay
        if time.monotonic() >= due_at:
            return True
        self._next_due = due_at if self._next_due is None else min(self._next_due, due_at)
        return False

    def _patch_status(self, side: Side, res: k.Res, obj: Obj, status: Obj) -> None:
        """Write status only when it differs, so a pass with nothing to do writes nothing."""
        current = strip_none(obj.get("status") or {})
        if all(current.get(key) == strip_none(v) for key, v in status.items()):
            return
        md = obj["metadata"]
        side.kube.patch(res, md["name"], {"status": status}, namespace=md.get("namespace"), sub="status")

    def _auth_key(self, side: Side) -> ed25519.Ed25519PrivateKey | None:
        sec = side.kube.get(k.SECRET, "authentication-keys", side.ns)
        if not sec:
            return None
        key = serialization.load_pem_private_key(k.unb64(sec["data"]["privateKey"]), None)
        return key if isinstance(key, ed25519.Ed25519PrivateKey) else None

    # --- networking: Configuration ------------------------------------------------------------------------
    def _configurations(self, side: Side, peer: Side) -> None:
        for cfg in side.items("configurations"):
            if not self._due(side, peer, cfg):
                continue
            gen = cfg["metadata"].get("generation", 1)
            old = (cfg.get("status") or {}).get("conditions")
            cond = {
                "type": "NetworkCIDRsConfigured",
                "status": "True",
                "observedGeneration": gen,
                "reason": "NetworkCIDRsConfigured",
                "message": "The network CIDRs have been configured (liqo-standin: not remapped)",
            }
            remote_cidr = ((cfg.get("spec") or {}).get("remote") or {}).get("cidr") or {}
            self._patch_status(
                side,
                k.CONFIGURATION,
                cfg,
                {"conditions": merge_conditions(old, [cond]), "remote": {"cidr": remote_cidr}},
            )

    # --- authentication: nonces ---------------------------------------------------------------------------
    def _nonces(self, side: Side, peer: Side) -> None:
        for sec in side.items("nonces"):
            if (sec.get("data") or {}).get("nonce") or not self._due(side, peer, sec):
                continue
            # noncecreator_controller.go: 64 random bytes, base64 text stored as the value.
            nonce = base64.b64encode(os.urandom(64)).decode()
            md = sec["metadata"]
            side.kube.patch(k.SECRET, md["name"], {"data": {"nonce": k.b64(nonce)}}, md["namespace"])

    def _signed_nonces(self, side: Side, peer: Side) -> None:
        key = None
        for sec in side.items("signednonces"):
            data = sec.get("data") or {}
            nonce = k.unb64(data.get("nonce"))
            if not nonce or not self._due(side, peer, sec):
                continue
            key = key or self._auth_key(side)
            if key is None:
                return
            signed = k.b64(key.sign(nonce))  # Ed25519 is deterministic: re-signing is a no-op
            if data.get("signedNonce") != signed:
                md = sec["metadata"]
                side.kube.patch(k.SECRET, md["name"], {"data": {"signedNonce": signed}}, md["namespace"])

    # --- authentication: Tenant (provider side) -----------------------------------------------------------
    def _tenants(self, side: Side, peer: Side) -> None:
        for tenant in side.items("tenants"):
            md, spec = tenant["metadata"], tenant.get("spec") or {}
            consumer_id = spec.get("clusterID") or labels(tenant).get(REMOTE)
            if md.get("deletionTimestamp") or not consumer_id or not self._due(side, peer, tenant):
                continue
            if self._fault(side, peer, "tenant") == "Never":
                continue  # authentication never completes
            handshake = spec.get("authzPolicy", "KeysExchange") != "TolerateNoHandshake"
            if handshake and not self._verify_handshake(side, tenant, consumer_id):
                continue
            ns = self._tenant_namespace(side, consumer_id)
            status: Obj = {"tenantNamespace": ns}
            if handshake:
                cert = self._issue_certificate(side, consumer_id, ns, k.unb64(spec.get("csr")))
                if cert is None:
                    self._patch_status(side, k.TENANT, tenant, status)
                    continue  # the CSR is being signed; its watch wakes us up
                status["authParams"] = {
                    "ca": k.b64(side.kube.ca_pem),
                    "signedCRT": k.b64(cert),
                    "apiServer": side.kube.server,
                    "proxyURL": spec.get("proxyURL"),
                }
                self._bind_remote_controlplane(side, tenant, consumer_id, ns)
            self._patch_status(side, k.TENANT, tenant, status)

    def _verify_handshake(self, side: Side, tenant: Obj, consumer_id: str) -> bool:
        """tenant_controller.go verifyHandshake: nonce signature, CSR CN=<consumer>, O=liqo.io, same key."""
        spec = tenant.get("spec") or {}
        nonces = [s for s in side.items("nonces") if labels(s).get(REMOTE) == consumer_id]
        nonce = k.unb64((nonces[0].get("data") or {}).get("nonce")) if nonces else b""
        try:
            pub = serialization.load_pem_public_key(k.unb64(spec.get("publicKey")))
            if not isinstance(pub, ed25519.Ed25519PublicKey) or not nonce:
                raise ValueError("no nonce, or not an Ed25519 public key")
            pub.verify(k.unb64(spec.get("signature")), nonce)
            csr = x509.load_pem_x509_csr(k.unb64(spec.get("csr")))
            cn = csr.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
            org = csr.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)
            if not cn or cn[0].value != consumer_id or not org or org[0].value != "liqo.io":
                raise ValueError("CSR subject must be CN=<consumer cluster ID>, O=liqo.io")
            der = serialization.Encoding.DER
            spki = serialization.PublicFormat.SubjectPublicKeyInfo
            if csr.public_key().public_bytes(der, spki) != pub.public_bytes(der, spki):
                raise ValueError("the CSR is not for the Tenant's public key")
        except Exception as e:
            log.warning("Tenant %s: handshake not verified: %s", tenant["metadata"]["name"], e)
            return False
        return True

    def _tenant_namespace(self, side: Side, remote_id: str) -> str:
        for ns in side.items("tenantnamespaces"):
            if labels(ns).get(REMOTE) == remote_id:
                return str(ns["metadata"]["name"])
        name = f"liqo-tenant-{remote_id}"
        lbl = {REMOTE: remote_id, TENANT_NS: "true"}
        lbl |= {f"pod-security.kubernetes.io/{m}": "privileged" for m in ("enforce", "audit", "warn")}
        try:
            side.kube.create(
                k.NAMESPACE,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": lbl}},
            )
        except KubeError as e:
            if e.status != 409:
                raise
        return name

    def _issue_certificate(self, side: Side, consumer_id: str, ns: str, csr_pem: bytes) -> bytes | None:
        """A client certificate through a real CSR (signer kube-apiserver-client), approved here, signed by
        kube-controller-manager; kept in Secret liqo-remote-certificate like Liqo's identity manager does."""
        kc = side.kube
        stored = kc.get(k.SECRET, "liqo-remote-certificate", ns)
        sdata = (stored or {}).get("data") or {}
        if sdata.get("certificate") and k.unb64(sdata.get("csr")) == csr_pem:
            return k.unb64(sdata["certificate"])
        name = f"liqo-identity-{consumer_id[:40]}-{hashlib.sha256(csr_pem).hexdigest()[:10]}"
        csr = kc.get(k.CSR, name)
        if csr is None:
            csr = kc.create(
                k.CSR,
                {
                    "apiVersion": "certificates.k8s.io/v1",
                    "kind": "CertificateSigningRequest",
                    "metadata": {"name": name, "labels": {"liqo.io/remote-tenant-csr": "true", **MANAGED}},
                    "spec": {
                        "request": k.b64(csr_pem),
                        "signerName": "kubernetes.io/kube-apiserver-client",
                        "usages": ["digital signature", "key encipherment", "client auth"],
                    },
                },
            )
        conds = (csr.get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Approved" for c in conds):
            csr.setdefault("status", {})["conditions"] = [
                *conds,
                {
                    "type": "Approved",
                    "status": "True",
                    "reason": "IdentityManagerApproval",
                    "message": "This CSR was approved by the liqo-standin (as Liqo Identity Manager)",
                },
            ]
            csr = kc.replace(k.CSR, csr, sub="approval")
        failed = [c for c in conds if c["type"] == "Failed"]
        if failed:
            log.warning("CSR %s failed: %s", name, failed[0].get("message"))
        cert_b64 = (csr.get("status") or {}).get("certificate")
        if not cert_b64:
            return None
        cert = k.unb64(cert_b64)
        kc.apply(
            k.SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "liqo-remote-certificate",
                    "namespace": ns,
                    "labels": {REMOTE: consumer_id},
                },
                "data": {"csr": k.b64(csr_pem), "certificate": k.b64(cert)},
            },
            MANAGER,
            namespace=ns,
        )
        return cert

    def _bind_remote_controlplane(self, side: Side, tenant: Obj, consumer_id: str, ns: str) -> None:
        """RoleBinding liqo-binding-<ClusterRole> for User <consumer ID> in the tenant ns (bindings.go)."""
        roles = side.kube.list(k.CLUSTERROLE, selector="app.kubernetes.io/name=remote-controlplane")
        for role in roles:
            rname = role["metadata"]["name"]
            side.kube.apply(
                k.ROLEBINDING,
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {
                        "name": f"liqo-binding-{rname}",
                        "namespace": ns,
                        "labels": {"app.kubernetes.io/managed-by": "liqo", REMOTE: consumer_id},
                        "ownerReferences": [owner(tenant)],
                    },
                    "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": consumer_id}],
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": rname,
                    },
                },
                MANAGER,
                namespace=ns,
            )

    # --- authentication: Identity (consumer side) ---------------------------------------------------------
    def _identities(self, side: Side, peer: Side) -> None:
        key_pem = None
        for ident in side.items("identities"):
            md, spec = ident["metadata"], ident.get("spec") or {}
            params = spec.get("authParams") or {}
            if md.get("deletionTimestamp") or not params.get("signedCRT") or not self._due(side, peer, ident):
                continue
            if key_pem is None:
                sec = side.kube.get(k.SECRET, "authentication-keys", side.ns)
                if not sec:
                    return
                key_pem = sec["data"]["privateKey"]  # base64 of the PEM: what client-key-data wants
            remote_ns = spec.get("namespace") if spec.get("type") == "ControlPlane" else None
            kubeconfig = self._kubeconfig(md["name"], spec.get("clusterID", ""), params, key_pem, remote_ns)
            secret_name = f"kubeconfig-{md['name']}"
            annotations = {REMOTE_TENANT_NS: remote_ns} if remote_ns else {}
            side.kube.apply(
                k.SECRET,
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": secret_name,
                        "namespace": md["namespace"],
                        "labels": {REMOTE: spec.get("clusterID", ""), IDENTITY_TYPE: spec.get("type", "")},
                        "annotations": annotations,
                        "ownerReferences": [owner(ident)],
                    },
                    "data": {"kubeconfig": k.b64(kubeconfig)},
                },
                MANAGER,
                namespace=md["namespace"],
            )
            self._patch_status(side, k.IDENTITY, ident, {"kubeconfigSecretRef": {"name": secret_name}})

    @staticmethod
    def _kubeconfig(user: str, cluster: str, params: Obj, key_b64: str, namespace: str | None) -> str:
        """kubeconfig.go GenerateKubeconfig: one cluster, one user, context "default-context"."""
        cl: Obj = {"server": params.get("apiServer", ""), "certificate-authority-data": params.get("ca", "")}
        if params.get("proxyURL"):
            cl["proxy-url"] = params["proxyURL"]
        ctx: Obj = {"cluster": cluster, "user": user}
        if namespace:
            ctx["namespace"] = namespace
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": cl}],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": params["signedCRT"], "client-key-data": key_b64},
                }
            ],
            "contexts": [{"name": "default-context", "context": ctx}],
            "current-context": "default-context",
        }
        return yaml.safe_dump(cfg, sort_keys=False)

    # --- networking: gateways -----------------------------------------------------------------------------
    def _gateways(self, side: Side, peer: Side) -> None:
        for res, what in ((k.GATEWAYSERVER, "gatewayservers"), (k.GATEWAYCLIENT, "gatewayclients")):
            for gw in side.items(what):
                md, spec = gw["metadata"], gw.get("spec") or {}
                if md.get("deletionTimestamp") or not self._due(side, peer, gw):
                    continue
                ns, remote = md["namespace"], labels(gw).get(REMOTE, "")
                secret_name = (spec.get("secretRef") or {}).get("name") or self._gateway_keys(side, gw, remote)
                self._gateway_deployment(side, gw)
                status: Obj = {
                    "secretRef": {"apiVersion": "v1", "kind": "Secret", "name": secret_name, "namespace": ns}
                }
                if res is k.GATEWAYSERVER:
                    ep = spec.get("endpoint") or {}
                    port = ep.get("nodePort") if ep.get("serviceType") == "NodePort" and ep.get("nodePort") else None
                    status["endpoint"] = {
                        # No Service/LoadBalancer: the address is the loadBalancerIP asked for, else loopback.
                        "addresses": [ep.get("loadBalancerIP") or "127.0.0.1"],
                        "port": port or ep.get("port") or 51840,
                        "protocol": "UDP",
                    }
                self._patch_status(side, res, gw, status)

    def _gateway_keys(self, side: Side, gw: Obj, remote: str) -> str:
        """Secret gw-<name> with a WireGuard (x25519) pair, raw 32 bytes each (wireguard/k8s.go)."""
        md = gw["metadata"]
        name = f"gw-{md['name']}"
        if side.kube.get(k.SECRET, name, md["namespace"]) is None:
            priv = x25519.X25519PrivateKey.generate()
            raw = serialization.Encoding.Raw
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": md["namespace"],
                    "labels": {REMOTE: remote, GW_RESOURCE: "true", **MANAGED},
                    "ownerReferences": [owner(gw)],
                },
                "data": {
                    "privateKey": k.b64(
                        priv.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
                    ),
                    "publicKey": k.b64(priv.public_key().public_bytes(raw, serialization.PublicFormat.Raw)),
                },
            }
            try:
                side.kube.create(k.SECRET, body, md["namespace"])
            except KubeError as e:
                if e.status != 409:
                    raise
        return name

    def _gateway_deployment(self, side: Side, gw: Obj) -> None:
        """Deployment gw-<name>, made Ready without a kubelet (see _make_ready)."""
        md = gw["metadata"]
        name, ns = f"gw-{md['name']}", md["namespace"]
        dep = side.kube.get(k.DEPLOYMENT, name, ns)
        if dep is None:
            pod_labels = {GW_POD: md["name"], "networking.liqo.io/component": "gateway"}
            dep = side.kube.create(
                k.DEPLOYMENT,
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": {**pod_labels, REMOTE: labels(gw).get(REMOTE, ""), **MANAGED},
                        "ownerReferences": [owner(gw)],
                    },
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {GW_POD: md["name"]}},
                        "template": {
                            "metadata": {"labels": pod_labels},
                            "spec": {
                                "containers": [{"name": "gateway", "image": "liqo-standin.invalid/gateway:none"}],
                                "automountServiceAccountToken": False,
                                "schedulerName": SCHEDULER,
                            },
                        },
                    },
                },
                ns,
            )
        self._make_ready(side, dep)

    def _make_ready(self, side: Side, dep: Obj) -> None:
        """No kubelet runs: with kube-controller-manager, mark the Deployment's pods Ready (status follows);
        without one (no observedGeneration after 5 s), write the Deployment's status directly."""
        md, st = dep["metadata"], dep.get("status") or {}
        want = (dep.get("spec") or {}).get("replicas", 1)
        if st.get("readyReplicas", 0) >= want:
            return
        if st.get("observedGeneration"):
            sel = ",".join(f"{a}={b}" for a, b in dep["spec"]["selector"]["matchLabels"].items())
            for pod in side.kube.list(k.POD, md["namespace"], sel):
                conds = (pod.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                    continue
                t = now()
                ready = [
                    {"type": c, "status": "True", "lastTransitionTime": t}
                    for c in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ]
                status = {"phase": "Running", "conditions": ready, "startTime": t, "podIP": "127.0.0.1"}
                side.kube.patch(k.POD, pod["metadata"]["name"], {"status": status}, md["namespace"], sub="status")
            return
        created = datetime.strptime(md["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if (datetime.now(UTC) - created).total_seconds() < 5:
            self._next_due = (
                time.monotonic() + 5.5 if self._next_due is None else min(self._next_due, time.monotonic() + 5.5)
            )
            return
        status = {
            "observedGeneration": md.get("generation", 1),
            "replicas": want,
            "updatedReplicas": want,
            "readyReplicas": want,
            "availableReplicas": want,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}],
        }
        side.kube.patch(k.DEPLOYMENT, md["name"], {"status": status}, md["namespace"], sub="status")

    # --- networking: Connection (what the gateway pods create) --------------------------------------------
    def _connections(self, side: Side, peer: Side) -> None:
        gateways = [(g, "Server") for g in side.items("gatewayservers")] + [
            (g, "Client") for g in side.items("gatewayclients")
        ]
        live = set()
        for gw, role in gateways:
            md = gw["metadata"]
            if md.get("deletionTimestamp"):
                continue
            live.add((md["namespace"], f"gw-{md['name']}"))
            value = self._connection_value(side, peer, gw)
            conn_name = f"gw-{md['name']}"
            existing = next(
                (
                    c
                    for c in side.items("connections")
                    if c["metadata"]["name"] == conn_name and c["metadata"]["namespace"] == md["namespace"]
                ),
                None,
            )
            if value is None:
                if existing and labels(existing).get("app.kubernetes.io/managed-by") == MANAGER:
                    side.kube.delete(k.CONNECTION, conn_name, md["namespace"])
                continue
            if existing is None:
                existing = side.kube.create(
                    k.CONNECTION,
                    {
                        "apiVersion": k.CONNECTION.api_version,
                        "kind": "Connection",
                        "metadata": {
                            "name": conn_name,
                            "namespace": md["namespace"],
                            "labels": {REMOTE: labels(gw).get(REMOTE, ""), **MANAGED},
                            "ownerReferences": [owner(gw)],
                        },
                        "spec": {
                            "type": role,
                            "gatewayRef": {
                                "apiVersion": k.GATEWAYSERVER.api_version,
                                "kind": f"WgGateway{role}",
                                "name": md["name"],
                                "namespace": md["namespace"],
                                "uid": md["uid"],
                            },
                        },
                    },
                    md["namespace"],
                )
            self._patch_status(side, k.CONNECTION, existing, {"value": value})
        # Connections derived from gateways that are gone.
        for conn in side.items("connections"):
            cmd = conn["metadata"]
            if (
                labels(conn).get("app.kubernetes.io/managed-by") == MANAGER
                and (cmd["namespace"], cmd["name"]) not in live
            ):
                side.kube.delete(k.CONNECTION, cmd["name"], cmd["namespace"])

    def _connection_value(self, side: Side, peer: Side, gw: Obj) -> str | None:
        """None (no Connection yet), Connecting, Connected or Error, from both sides' gateways and keys."""
        fault = self._fault(side, peer, "connection")
        if fault == "Never":
            return None
        md = gw["metadata"]
        remote = labels(gw).get(REMOTE)
        own_pub = self._gateway_public_key(side, gw)
        dep = side.kube.get(k.DEPLOYMENT, f"gw-{md['name']}", md["namespace"])
        ready = bool(dep and (dep.get("status") or {}).get("readyReplicas"))
        # The gateway pod configures its tunnel once it has its keys and the peer's PublicKey.
        pks = [p for p in side.items("publickeys") if labels(p).get(REMOTE) == remote]
        if not own_pub or not ready or not pks or not remote:
            return None
        if fault in ("Error", "Connecting"):
            return fault
        # Connected: the other cluster runs the peer gateway, and each side holds the other's real key.
        if peer.cluster_id != remote:
            return "Connecting"
        peer_gws = peer.for_peer("gatewayservers", side.cluster_id or "") + peer.for_peer(
            "gatewayclients", side.cluster_id or ""
        )
        peer_pubs = [self._gateway_public_key(peer, g) for g in peer_gws]
        peer_pks = [p for p in peer.items("publickeys") if labels(p).get(REMOTE) == side.cluster_id]
        mine_known = any((p.get("spec") or {}).get("publicKey") == own_pub for p in peer_pks)
        theirs_known = any((p.get("spec") or {}).get("publicKey") in peer_pubs for p in pks)
        if not peer_gws:
            return "Connecting"
        key = f"{side.name}/{md['uid']}"
        if not (mine_known and theirs_known):
            # Wrong keys: the handshake fails; like Liqo's ping check, report Error only after a while.
            since = self._mismatch_since.setdefault(key, time.monotonic())
            if time.monotonic() - since < MISMATCH_GRACE:
                self._next_due = min(self._next_due or 1e18, since + MISMATCH_GRACE)
                return "Connecting"
            return "Error"
        self._mismatch_since.pop(key, None)
        return "Connected"

    def _gateway_public_key(self, side: Side, gw: Obj) -> str | None:
        md, spec = gw["metadata"], gw.get("spec") or {}
        name = (spec.get("secretRef") or {}).get("name") or f"gw-{md['name']}"
        sec = side.kube.get(k.SECRET, name, md["namespace"])
        return ((sec or {}).get("data") or {}).get("publicKey")

    # --- offloading: ResourceSlice and VirtualNode --------------------------------------------------------
    def _resourceslices(self, side: Side, peer: Side) -> None:
        for rs in side.items("resourceslices"):
            md, spec = rs["metadata"], rs.get("spec") or {}
            provider_id = spec.get("providerClusterID") or labels(rs).get(REMOTE)
            if md.get("deletionTimestamp") or provider_id != peer.cluster_id or not self._due(side, peer, rs):
                continue
            # The crd-replicator needs control-plane access to the provider (an Identity's kubeconfig).
            if not [s for s in side.items("kubeconfigs") if labels(s).get(REMOTE) == provider_id]:
                continue
            auth, auth_msg = "Accepted", "The tenant is authenticated"
            tenants = [
                t
                for t in peer.items("tenants")
                if (t.get("spec") or {}).get("clusterID") == side.cluster_id
                and not t["metadata"].get("deletionTimestamp")
            ]
            tenant = tenants[0] if tenants else None
            tspec = (tenant or {}).get("spec") or {}
            if tenant is None:
                auth, auth_msg = "Denied", "No Tenant for the consumer on the provider"
            elif tspec.get("tenantCondition", "Active") != "Active":
                auth, auth_msg = "Denied", f"The Tenant is {tspec.get('tenantCondition')}"
            elif tspec.get("authzPolicy") != "TolerateNoHandshake" and not (tenant.get("status") or {}).get(
                "authParams"
            ):
                auth, auth_msg = "Denied", "The Tenant is not authenticated"
            fault = self._fault(side, peer, "resourceslice")
            if fault == "AuthDenied":
                auth, auth_msg = "Denied", "Denied by liqo-standin fault injection"
            res_status, res_msg = "Accepted", "The requested resources are available"
            # Liqo's reasons (its remoteresourceslice controller); the messages are the stand-in's.
            res_reason = f"ResourceSliceResources{res_status}"
            if fault == "Denied":
                res_status, res_msg = "Denied", "Denied by liqo-standin fault injection"
                res_reason = "ResourceSliceResourcesDenied"
            elif fault == "DefaultClassDisabled":  # a provider on Liqo after v1.2.0 that turned the class off
                res_status, res_reason = "Denied", "DefaultResourceSliceClassDisabled"
                res_msg = "the default ResourceSlice class is disabled on the provider (liqo-standin fault injection)"
            conds = [
                {
                    "type": "Authentication",
                    "status": auth,
                    "reason": f"ResourceSliceAuthentication{auth}",
                    "message": auth_msg,
                },
                {
                    "type": "Resources",
                    "status": res_status,
                    "reason": res_reason,
                    "message": res_msg,
                },
            ]
            accepted = auth == "Accepted" and res_status == "Accepted"
            status: Obj = {
                "conditions": merge_conditions((rs.get("status") or {}).get("conditions"), conds),
                "resources": (spec.get("resources") or DEFAULT_SLICE_RESOURCES) if accepted else None,
            }
            self._patch_status(side, k.RESOURCESLICE, rs, status)

    def _virtualnodes(self, side: Side, peer: Side) -> None:
        wanted: dict[tuple[str, str], Obj] = {}
        for rs in side.items("resourceslices"):
            md = rs["metadata"]
            conds = {c["type"]: c["status"] for c in (rs.get("status") or {}).get("conditions") or []}
            if (
                not md.get("deletionTimestamp")
                and (md.get("annotations") or {}).get(CREATE_VN) == "true"
                and conds.get("Authentication") == "Accepted"
                and conds.get("Resources") == "Accepted"
                and self._fault(side, peer, "virtualnode") != "Never"
            ):
                wanted[(md["namespace"], md["name"])] = rs
        # Remove what no accepted slice asks for any more.
        for vn in side.items("virtualnodes"):
            vmd = vn["metadata"]
            if (
                labels(vn).get("app.kubernetes.io/managed-by") == MANAGER
                and (vmd["namespace"], vmd["name"]) not in wanted
            ):
                side.kube.delete(k.VIRTUALNODE, vmd["name"], vmd["namespace"])
                side.kube.delete(k.NODE, vmd["name"])
                side.kube.delete(k.POD, vk_pod_name(vmd["name"]), vmd["namespace"])
        vn_names = {n for (_, n) in wanted}
        for node in side.items("vnodes"):
            if labels(node).get("app.kubernetes.io/managed-by") == MANAGER and node["metadata"]["name"] not in vn_names:
                side.kube.delete(k.NODE, node["metadata"]["name"])
        for (ns, name), rs in wanted.items():
            self._ensure_virtualnode(side, rs, ns, name)

    def _ensure_virtualnode(self, side: Side, rs: Obj, ns: str, name: str) -> None:
        remote = (rs.get("spec") or {}).get("providerClusterID") or labels(rs).get(REMOTE, "")
        resources = (rs.get("status") or {}).get("resources") or DEFAULT_SLICE_RESOURCES
        vn = next(
            (
                v
                for v in side.items("virtualnodes")
                if v["metadata"]["name"] == name and v["metadata"]["namespace"] == ns
            ),
            None,
        )
        if vn is None:
            kubeconfigs = [s for s in side.items("kubeconfigs") if labels(s).get(REMOTE) == remote]
            spec: Obj = {"clusterID": remote, "createNode": True, "resourceQuota": {"hard": resources}}
            if kubeconfigs:
                spec["kubeconfigSecretRef"] = {"name": kubeconfigs[0]["metadata"]["name"]}
            vn = side.kube.create(
                k.VIRTUALNODE,
                {
                    "apiVersion": k.VIRTUALNODE.api_version,
                    "kind": "VirtualNode",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        # Liqo's virtualnodecreator labels it with the slice it comes from.
                        "labels": {REMOTE: remote, "liqo.io/resourceslice-name": name, **MANAGED},
                        "ownerReferences": [owner(rs)],
                    },
                    "spec": spec,
                },
                ns,
            )
        if vn["metadata"].get("deletionTimestamp"):
            return
        self._ensure_vk_pod(side, ns, name, remote)
        self._ensure_node(side, name, remote, resources)
        conds = [
            {
                "type": "VirtualKubelet",
                "status": "Running",
                "reason": "Running",
                "message": "liqo-standin: no virtual kubelet runs",
            },
            {
                "type": "Node",
                "status": "Running",
                "reason": "Running",
                "message": "The virtual Node is Ready",
            },
        ]
        self._patch_status(
            side,
            k.VIRTUALNODE,
            vn,
            {"conditions": merge_conditions((vn.get("status") or {}).get("conditions"), conds)},
        )

    def _ensure_vk_pod(self, side: Side, ns: str, name: str, remote: str) -> None:
        """The virtual kubelet's Pod (Deployment vk-<name> in Liqo), made Ready: no kubelet runs here."""
        pod_name = vk_pod_name(name)
        pod = next((p for p in side.items("vkpods") if p["metadata"]["name"] == pod_name), None)
        if pod is None:
            pod = side.kube.get(k.POD, pod_name, ns)
        if pod is None:
            pod = side.kube.create(
                k.POD,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name,
                        "namespace": ns,
                        "labels": {
                            "offloading.liqo.io/component": "virtual-kubelet",
                            REMOTE: remote,
                            "liqo.io/virtual-node": name,
                            **MANAGED,
                        },
                    },
                    "spec": {
                        "containers": [{"name": "virtual-kubelet", "image": "liqo-standin/virtual-kubelet"}],
                        "schedulerName": SCHEDULER,
                    },
                },
                ns,
            )
        conds = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            return
        t = now()
        ready = [{"type": t_, "status": "True", "lastTransitionTime": t} for t_ in ("PodScheduled", "Ready")]
        side.kube.patch(k.POD, pod_name, {"status": {"phase": "Running", "conditions": ready}}, ns, sub="status")

    def _ensure_node(self, side: Side, name: str, remote: str, resources: dict[str, str]) -> None:
        """The virtual Node, kept Ready by a heartbeat (else the node controller marks it Unknown)."""
        node = next((n for n in side.items("vnodes") if n["metadata"]["name"] == name), None)
        if node is None:
            node = side.kube.get(k.NODE, name)
        if node is None:
            node = side.kube.create(
                k.NODE,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "liqo.io/type": "virtual-node",
                            REMOTE: remote,
                            "kubernetes.io/hostname": name,
                            "kubernetes.io/role": "agent",
                            "type": "virtual-kubelet",
                            **MANAGED,
                        },
                    },
                    "spec": {
                        "taints": [
                            {
                                "key": "virtual-node.liqo.io/not-allowed",
                                "value": "true",
                                "effect": "NoExecute",
                            }
                        ]
                    },
                },
            )
        ready = [
            c
            for c in (node.get("status") or {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        ]
        last = self._heartbeats.get(name, 0.0)
        if ready and time.monotonic() - last < NODE_HEARTBEAT:
            self._next_due = min(self._next_due or 1e18, last + NODE_HEARTBEAT)
            return
        t = now()
        status = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "liqo-standin heartbeat",
                    "lastHeartbeatTime": t,
                    "lastTransitionTime": ready[0].get("lastTransitionTime", t) if ready else t,
                }
            ],
        }
        side.kube.patch(k.NODE, name, {"status": status}, sub="status")
        self._heartbeats[name] = time.monotonic()
        self._next_due = min(self._next_due or 1e18, time.monotonic() + NODE_HEARTBEAT)

    # --- ForeignCluster -----------------------------------------------------------------------------------
    def _foreigncluster(self, side: Side, peer: Side) -> None:
        """core.liqo.io ForeignCluster <peer ID>, status computed like foreigncluster-controller/status.go."""
        pid = peer.cluster_id
        if not pid:
            return
        cfgs = side.for_peer("configurations", pid)
        conns = side.for_peer("connections", pid)
        servers = side.for_peer("gatewayservers", pid)
        clients = side.for_peer("gatewayclients", pid)
        tenants = [t for t in side.items("tenants") if (t.get("spec") or {}).get("clusterID") == pid]
        idents = [
            i
            for i in side.items("identities")
            if (i.get("spec") or {}).get("clusterID") == pid and (i.get("spec") or {}).get("type") == "ControlPlane"
        ]
        kubeconfigs = side.for_peer("kubeconfigs", pid)
        vns = side.for_peer("virtualnodes", pid)
        slices = side.for_peer("resourceslices", pid)
        tns = side.for_peer("tenantnamespaces", pid)
        fc = side.kube.get(k.FOREIGNCLUSTER, pid)
        if fc is None:
            if not any((cfgs, conns, servers, clients, tenants, idents, kubeconfigs, vns, slices, tns)):
                return
            fc = side.kube.create(
                k.FOREIGNCLUSTER,
                {
                    "apiVersion": k.FOREIGNCLUSTER.api_version,
                    "kind": "ForeignCluster",
                    "metadata": {"name": pid, "labels": {REMOTE: pid}},
                    "spec": {"clusterID": pid},
                },
            )
        old = fc.get("status") or {}
        old_mod = old.get("modules") or {}

        def c(t: str, s: str, reason: str) -> Obj:
            # Liqo's reason names; the message is a spaced-out reason (liqo-standin wording, not Liqo's).
            msg = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", reason).capitalize()
            return {"type": t, "status": s, "reason": reason, "message": msg}

        # Networking.
        net: list[Obj] = []
        net_on = bool(cfgs or conns)
        exceptions: list[Obj] = []
        if cfgs:
            net.append(c("NetworkConfigurationStatus", "Ready", "NetworkConfigurationPresence"))
        else:
            exceptions.append(c("NetworkConfigurationStatus", "NotReady", "NetworkConfigurationMissing"))
        exceptions.append(
            c("NetworkGatewayPresence", "Ready", "GatewayPresence")
            if servers or clients
            else c("NetworkGatewayPresence", "NotReady", "GatewayMissing")
        )
        for gws, ctype in ((servers, "NetworkGatewayServerStatus"), (clients, "NetworkGatewayClientStatus")):
            if gws:
                md = gws[0]["metadata"]
                dep = side.kube.get(k.DEPLOYMENT, f"gw-{md['name']}", md["namespace"])
                ok = bool(dep and (dep.get("status") or {}).get("readyReplicas"))
                net.append(c(ctype, "Ready" if ok else "NotReady", "GatewaysReady" if ok else "GatewaysNotReady"))
        if conns:
            value = (conns[0].get("status") or {}).get("value")
            mapped = {"Connected": "Established", "Connecting": "Pending"}.get(value or "", "Error")
            reason = {"Established": "ConnectionEstablished", "Pending": "ConnectionPending"}.get(
                mapped, "ConnectionError"
            )
            net.append(c("NetworkConnectionStatus", mapped, reason))
        else:
            exceptions.append(c("NetworkConnectionStatus", "NotReady", "ConnectionMissing"))
        if net_on:
            net += exceptions

        # Authentication.
        auth: list[Obj] = []
        consumer = provider = False
        tenant_ns: Obj = {}
        api_url = None
        if tenants:
            consumer = True
            t = tenants[0]
            tst, tsp = t.get("status") or {}, t.get("spec") or {}
            if tst.get("tenantNamespace"):
                tenant_ns["local"] = tst["tenantNamespace"]
            keys = tsp.get("authzPolicy") != "TolerateNoHandshake"
            ok = bool(tst.get("tenantNamespace")) and (bool(tst.get("authParams")) or not keys)
            auth.append(
                c(
                    "AuthTenantStatus",
                    "Ready" if ok else "NotReady",
                    "TenantReady" if ok else "TenantNotReady",
                )
            )
        if idents:
            provider = True
            i = idents[0]
            isp = i.get("spec") or {}
            api_url = (isp.get("authParams") or {}).get("apiServer") or None
            tenant_ns["local"] = i["metadata"]["namespace"]
            if isp.get("namespace"):
                tenant_ns["remote"] = isp["namespace"]
            ok = bool(((i.get("status") or {}).get("kubeconfigSecretRef") or {}).get("name"))
            auth.append(
                c(
                    "AuthIdentityControlPlaneStatus",
                    "Ready" if ok else "NotReady",
                    "IdentityReady" if ok else "IdentityNotReady",
                )
            )
        elif kubeconfigs:
            provider = True
            try:
                kcfg = yaml.safe_load(k.unb64(kubeconfigs[0]["data"]["kubeconfig"]))
                api_url = kcfg["clusters"][0]["cluster"]["server"]
            except Exception:
                api_url = None
        auth_on = bool(tenants or idents or kubeconfigs)

        # Offloading.
        off: list[Obj] = []
        if vns:
            provider = True
            running = [
                v
                for v in vns
                if any(
                    x["type"] == "VirtualKubelet" and x["status"] == "Running"
                    for x in (v.get("status") or {}).get("conditions") or []
                )
            ]
            nodes_ready = [
                n
                for n in side.items("vnodes")
                if n["metadata"]["name"] in {v["metadata"]["name"] for v in vns}
                and any(
                    x["type"] == "Ready" and x["status"] == "True"
                    for x in (n.get("status") or {}).get("conditions") or []
                )
            ]
            for ctype, n_ok in (
                ("OffloadingVirtualNodeStatus", len(running)),
                ("OffloadingNodeStatus", len(nodes_ready)),
            ):
                s = "Ready" if n_ok == len(vns) else "NotReady" if n_ok == 0 else "SomeNotReady"
                off.append(c(ctype, s, ctype.removeprefix("Offloading").replace("Status", "s") + s))

        role = {
            (True, True): "ConsumerAndProvider",
            (True, False): "Consumer",
            (False, True): "Provider",
        }.get((consumer, provider), "Unknown")
        top = [c("APIServerStatus", "Established", "APIServerReady")] if api_url else []
        status = {
            "role": role,
            "modules": {
                "networking": {
                    "enabled": net_on,
                    "conditions": merge_conditions((old_mod.get("networking") or {}).get("conditions"), net),
                },
                "authentication": {
                    "enabled": auth_on,
                    "conditions": merge_conditions((old_mod.get("authentication") or {}).get("conditions"), auth),
                },
                "offloading": {
                    "enabled": bool(vns),
                    "conditions": merge_conditions((old_mod.get("offloading") or {}).get("conditions"), off),
                },
            },
            "apiServerUrl": api_url,
            "tenantNamespace": tenant_ns,
            "conditions": merge_conditions(old.get("conditions"), top),
        }
        current = strip_none(old)
        desired = strip_none(status)
        for mod in desired["modules"].values():
            if not mod["conditions"]:
                del mod["conditions"]  # Liqo omits empty lists
        if not desired["conditions"]:
            del desired["conditions"]
        if {a: current.get(a) for a in desired} == desired and not (
            set(current) - set(desired) - {"observedGeneration"}
        ):
            return
        desired["observedGeneration"] = fc["metadata"].get("generation", 1)
        # Replace (not merge) so keys that disappeared (apiServerUrl, conditions) go away.
        fc["status"] = desired
        side.kube.replace(k.FOREIGNCLUSTER, fc, sub="status")


def vk_pod_name(virtual_node: str) -> str:
    return f"vk-{virtual_node}-standin"
