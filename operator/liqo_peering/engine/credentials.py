"""The provider credential a pass uses: the Secret's kubeconfig, or (spec.credentials.mint) a least-privilege
identity minted with it on the provider, kept in a Secret of its own; its renewal and its revocation.

Minting is a few steps, each recorded in the minted Secret before the next one (liqo/peeringuser.py), so a
restart at any point resumes it: no second identity, CSR or Secret. Once a credential is minted, a pass
reads only the minted Secret (from the informer's cache) and leaves the bootstrap Secret alone, until the
certificate is due for renewal.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.remotes import connect_remote
from liqo_peering.engine import discovery, protection
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.errors import (
    AccessRefused,
    CertificateNotIssued,
    CertificateRefused,
    ConsumerForbidden,
    LiqoNotInstalled,
    PeeringError,
    SecretNotFound,
)
from liqo_peering.kubeconfig import RemoteKubeconfig, load_remote_kubeconfig
from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.common import Common, dress
from liqo_peering.status.credentials import CredentialsObservation

log = structlog.get_logger("liqo_peering.credentials")
# How long a pass waits, on a watch, for the provider's signer to issue an approved certificate (it takes
# milliseconds when kube-controller-manager signs); then the pass fails and is retried.
ISSUE_TIMEOUT_SECONDS = 10
Connect = Callable[[RemoteKubeconfig], ClusterClient]


@dataclass(frozen=True)
class Credentials:
    kubeconfig: RemoteKubeconfig
    observation: CredentialsObservation | None = None  # None without spec.credentials.mint
    minted_secret: str | None = None  # the minted Secret's name, watched like the bootstrap one


def discovery_kubeconfig(
    local: ClusterClient,
    peering: dict[str, Any],
    spec: LiqoPeeringSpec,
    policy: KubeconfigPolicy,
    now: datetime,
    protect: bool = True,
) -> RemoteKubeconfig:
    """The kubeconfig discovery and the duplicate check reach the provider with, before anything is minted:
    the minted one while it is in use, else the bootstrap Secret's (also while renewal is due: the minted
    certificate may have expired), else the minted one still (renewal blocked). Mints nothing."""
    namespace, name = peering["metadata"]["namespace"], peering["metadata"]["name"]
    if not spec.credentials.mint:
        return discovery.read_remote_kubeconfig(local, namespace, name, spec, policy)
    secret_name = naming.minted_secret(name)
    state = pu.MintState.of(local.get(r.SECRET, secret_name, namespace))
    bootstrap_ref, present = _bootstrap(local, namespace, spec)
    observed = CredentialsObservation(f"{namespace}/{secret_name}", bootstrap_ref, bootstrap_present=present)
    if protect and state.kubeconfig is None and bootstrap_ref:  # unpeering a half-made peering falls back to it
        protection.protect(local, namespace, spec.secret_ref.name)
    minted = _load(state, policy)
    try:
        if minted is not None and (pu.next_step(state, now, spec.credentials.key_algorithm) == "use" or not present):
            return minted
        if present:
            return discovery.read_remote_kubeconfig(local, namespace, name, spec, policy)
        raise _bootstrap_missing(namespace, name, spec)
    except PeeringError as exc:
        raise MintingFailed(exc, observed) from None


def _bootstrap(local: ClusterClient, namespace: str, spec: LiqoPeeringSpec) -> tuple[str, bool]:
    """What mints: the bootstrap Secret (namespace/name, and whether it is there), or "" for the operator's
    cloud identity (spec.remoteCluster), which is always there and sits in no Secret."""
    if spec.remote_cluster is not None:
        return "", True
    ref = spec.secret_ref.name
    return f"{namespace}/{ref}", _find_secret(local, namespace, ref) is not None


def _bootstrap_missing(namespace: str, name: str, spec: LiqoPeeringSpec) -> SecretNotFound:
    return SecretNotFound(
        f"LiqoPeering {namespace}/{name}: Secret {namespace}/{spec.secret_ref.name} not found;"
        f" it must hold a kubeconfig of the provider able to mint the least-privilege credential"
        f" (spec.credentials.mint), under key {spec.secret_ref.key!r}"
    )


def provider_credentials(
    local: ClusterClient,
    peering: dict[str, Any],
    spec: LiqoPeeringSpec,
    policy: KubeconfigPolicy,
    now: datetime,
    connect: Connect = connect_remote,
    protect: bool = True,
    consumer_id: str | None = None,
    read: RemoteKubeconfig | None = None,
) -> Credentials:
    """The kubeconfig this pass reaches the provider with; minting, renewing or finishing either first. A pass
    calls it only after discovery and the duplicate check (``discovery_kubeconfig``), which give
    ``consumer_id``: a duplicate peering never mints, so never rebinds the first one's identity.

    ``protect`` (kubeconfig Secret protection): the Secret unpeering would need keeps the finalizer, the
    bootstrap one until a credential is minted, then the minted one; the bootstrap Secret is released.
    ``read``: the kubeconfig ``discovery_kubeconfig`` gave this pass, which is the Secret's without minting."""
    namespace, name = peering["metadata"]["namespace"], peering["metadata"]["name"]
    secret_name = naming.minted_secret(name)
    minted_ref = f"{namespace}/{secret_name}"
    if not spec.credentials.mint:
        kubeconfig = read or discovery.read_remote_kubeconfig(local, namespace, name, spec, policy)
        _revoke_switched_off(local, peering, spec, kubeconfig, connect)
        return Credentials(kubeconfig)
    state = pu.MintState.of(local.get(r.SECRET, secret_name, namespace))
    bootstrap_ref, present = _bootstrap(local, namespace, spec)
    observed = CredentialsObservation(minted_ref, bootstrap_ref, bootstrap_present=present)
    if protect and state.kubeconfig is None and bootstrap_ref:  # unpeering a half-made peering falls back to it
        protection.protect(local, namespace, spec.secret_ref.name)
    try:
        if pu.next_step(state, now, spec.credentials.key_algorithm) != "use":
            if present:
                bootstrap = discovery.read_remote_kubeconfig(local, namespace, name, spec, policy)
                state = _mint(local, peering, spec, bootstrap, state, now, connect, consumer_id)
            elif state.kubeconfig is None:
                raise _bootstrap_missing(namespace, name, spec)
            # else: due for renewal without a bootstrap Secret: the condition says so; it still works meanwhile
        assert state.kubeconfig is not None and state.cert is not None
        kubeconfig = load_remote_kubeconfig(
            state.kubeconfig, context=None, allow_exec=policy.allow_exec, allow_insecure_tls=policy.allow_insecure_tls
        )
    except PeeringError as exc:
        raise MintingFailed(exc, observed) from None
    if protect:
        protection.protect(local, namespace, secret_name)
    if present and bootstrap_ref:
        present = _let_go_of_bootstrap(local, namespace, name, spec)
    cert = state.cert
    return Credentials(
        kubeconfig,
        CredentialsObservation(
            minted_ref, bootstrap_ref, present, user=cert.cn, not_after=cert.not_after, renew_at=cert.renew_at
        ),
        secret_name,
    )


def _let_go_of_bootstrap(local: ClusterClient, namespace: str, name: str, spec: LiqoPeeringSpec) -> bool:
    """The minted credential is in use: release the bootstrap Secret's protection, and delete it with
    deleteBootstrapSecret, unless another LiqoPeering uses it. Whether it is still there."""
    bootstrap = spec.secret_ref.name
    cached = local.get(r.SECRET, bootstrap, namespace)
    if cached is None:
        return False
    if protection.FINALIZER in ((cached.get("metadata") or {}).get("finalizers") or []):  # a cache read at rest
        protection.release(local, namespace, bootstrap, exclude=name)
    if not spec.credentials.delete_bootstrap_secret:
        return True
    others = protection.users(local.find(r.LIQOPEERING, namespace), namespace, bootstrap, exclude=name)
    if others:
        log.info(f"kept the bootstrap Secret {namespace}/{bootstrap}: LiqoPeering {', '.join(others)} uses it too")
        return True
    local.delete(r.SECRET, bootstrap, namespace)
    log.info(f"deleted the bootstrap Secret {namespace}/{bootstrap}: the minted credential is in use")
    return False


class MintingFailed(Exception):
    """A PeeringError met while minting (``error``, which the status reports as it is), with what was observed
    of the credential until then."""

    def __init__(self, error: PeeringError, observation: CredentialsObservation) -> None:
        super().__init__(error.message)
        self.error, self.observation = error, observation


# -- minting ---------------------------------------------------------------------------------------------
def _mint(
    local: ClusterClient,
    peering: dict[str, Any],
    spec: LiqoPeeringSpec,
    bootstrap: RemoteKubeconfig,
    state: pu.MintState,
    now: datetime,
    connect: Connect,
    consumer_id: str | None,
) -> pu.MintState:
    """Run the minting steps until the minted kubeconfig is in use, with a client of the bootstrap kubeconfig
    that lives for this call only."""
    meta = peering["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    consumer_id = consumer_id or discovery.cluster_id(local, spec.liqo_namespace)
    client = connect(bootstrap)
    try:
        issued = False
        for _ in range(3):  # begin, issue, retire
            step = pu.next_step(state, now, spec.credentials.key_algorithm)
            # One certificate per pass: a signer may issue one already due (a lifetime under its backdating).
            if step == "use" or (step == "begin" and issued):
                break
            if step == "begin":
                state = _begin(local, peering, spec, consumer_id, _key_algorithm(client, spec))
            elif step == "issue":
                state = _issue(local, client, peering, spec, bootstrap, consumer_id, state)
                issued = True
            else:
                owner = naming.owner_labels(namespace, name)
                tenant_ns = discovery.ensure_tenant_namespace(client, consumer_id, owner, _common(spec))
                _bind(client, spec, consumer_id, tenant_ns, [state.user or ""], owner)
                state = pu.MintState.of(
                    local.merge_patch(r.SECRET, naming.minted_secret(name), namespace, pu.retired_patch())
                )
    except ConsumerForbidden as exc:  # this cluster's RBAC: the kubeconfig is not to blame
        raise exc.restated(
            f"minting: {exc.refused}; the operator may write the minted kubeconfig's Secret only when its chart"
            f" is installed with credentialsMinting=true (helm upgrade --reuse-values --set"
            f" credentialsMinting=true), or set spec.credentials.mint to false"
        ) from None  # retried: the chart's new RBAC takes effect without a change to the LiqoPeering
    except AccessRefused as exc:
        if spec.remote_cluster is not None:
            raise exc.restated(
                f"minting with the operator's cloud identity (spec.remoteCluster): {exc.refused}; minting needs"
                f" that identity to be mapped on the provider to rights that may create and approve CSRs and"
                f" create RoleBindings (the guide's access entry), or set spec.credentials.mint to false"
            ) from None  # retried: the rights change on the provider, which sends this cluster no event
        raise exc.restated(
            f"minting with the bootstrap kubeconfig of Secret {namespace}/{spec.secret_ref.name}:"
            f" {exc.refused}; minting needs a provider kubeconfig that may create and approve CSRs and"
            f" create RoleBindings (an admin one), or set spec.credentials.mint to false",
            transient=False,  # the bootstrap kubeconfig must change: its Secret's change wakes the peering
        ) from None
    finally:
        client.close()
    return state


def _common(spec: LiqoPeeringSpec) -> Common:
    """spec.commonMetadata, on what minting makes too (as it is when minted or renewed)."""
    return Common.of(spec.common_metadata)


def _key_algorithm(client: ClusterClient, spec: LiqoPeeringSpec) -> pu.KeyAlgorithm:
    """spec.credentials.keyAlgorithm, Auto resolved as liqoctl does: from the provider's liqo-controller-manager,
    Ed25519 when the bootstrap kubeconfig may not read it (any other failure is retried: guessing wrong would
    last as long as the certificate)."""
    setting = spec.credentials.key_algorithm
    if setting != "Auto":
        return pu.key_algorithm(setting, None)
    try:
        found = client.find(r.DEPLOYMENT, spec.remote_liqo_namespace, labels=pu.CONTROLLER_MANAGER_SELECTOR)
    except AccessRefused as exc:
        log.info(f"the provider's TLS compatibility mode is unknown ({exc.message}): minting an Ed25519 key")
        return pu.key_algorithm(setting, None)
    return pu.key_algorithm(setting, pu.tls_compatibility_mode(found))


def _begin(
    local: ClusterClient, peering: dict[str, Any], spec: LiqoPeeringSpec, consumer_id: str, algorithm: pu.KeyAlgorithm
) -> pu.MintState:
    """A new key and CN, stored before any CSR exists: a restart finishes this same minting."""
    meta = peering["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    secret_name = naming.minted_secret(name)
    owner = naming.owner_labels(namespace, name)
    local.create_if_absent(r.SECRET, dress(pu.secret(namespace, secret_name, peering, owner), _common(spec)))
    cn = pu.common_name(consumer_id, secrets.token_hex(16))
    key = pu.private_key_pem(pu.new_private_key(algorithm))
    log.info(f"minting the provider credential {cn} ({algorithm} key) into Secret {namespace}/{secret_name}")
    return pu.MintState.of(local.merge_patch(r.SECRET, secret_name, namespace, pu.begin_patch(cn, key)))


def _issue(
    local: ClusterClient,
    client: ClusterClient,
    peering: dict[str, Any],
    spec: LiqoPeeringSpec,
    bootstrap: RemoteKubeconfig,
    consumer_id: str,
    state: pu.MintState,
) -> pu.MintState:
    """Bind the pending CN (beside the current one, when renewing), have its certificate issued, switch the
    Secret to it, then unbind the old CN."""
    meta = peering["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    owner = naming.owner_labels(namespace, name)
    assert state.pending_user is not None and state.pending_key is not None
    cn, key_pem = state.pending_user, state.pending_key
    tenant_ns = discovery.ensure_tenant_namespace(client, consumer_id, owner, _common(spec))
    _bind(client, spec, consumer_id, tenant_ns, [u for u in (state.user, cn) if u], owner)
    request = pu.csr_request(pu.load_private_key(key_pem), cn)
    cert = _certificate(client, spec, consumer_id, request, f"{namespace}/{name}", owner)
    config = pu.kubeconfig(bootstrap, consumer_id, cert, key_pem, tenant_ns)
    secret_name = naming.minted_secret(name)
    state = pu.MintState.of(local.merge_patch(r.SECRET, secret_name, namespace, pu.issued_patch(state, cn, config)))
    log.info(f"minted the provider credential {cn} (Secret {namespace}/{secret_name})")
    client.delete(r.CSR, pu.user_name(consumer_id))  # a record only: the certificate is in the Secret
    if state.retired_user:
        _bind(client, spec, consumer_id, tenant_ns, [cn], owner)
        state = pu.MintState.of(local.merge_patch(r.SECRET, secret_name, namespace, pu.retired_patch()))
    return state


def _bind(
    client: ClusterClient,
    spec: LiqoPeeringSpec,
    consumer_id: str,
    tenant_ns: str,
    users: list[str],
    owner: dict[str, str],
) -> None:
    """Liqo's peering-user Role and ClusterRole bound to ``users``, all owned by the user's revoke ClusterRole."""
    common = _common(spec)
    role, _ = client.create_if_absent(r.CLUSTER_ROLE, dress(pu.revoke_role(consumer_id, owner), common))
    owners = pu.owned_by_revoke_role(role)
    liqo_ns = spec.remote_liqo_namespace
    reader = _liqo_role(client, r.ROLE, liqo_ns)
    writer = _liqo_role(client, r.CLUSTER_ROLE, None)
    client.ensure(r.CLUSTER_ROLE_BINDING, dress(pu.revoke_binding(consumer_id, users, owner, owners), common))
    client.ensure(r.ROLE_BINDING, dress(pu.reader_binding(consumer_id, liqo_ns, reader, users, owner, owners), common))
    client.ensure(
        r.ROLE_BINDING, dress(pu.writer_binding(consumer_id, tenant_ns, writer, users, owner, owners), common)
    )


def _liqo_role(client: ClusterClient, res: r.Resource, namespace: str | None) -> str:
    """The name of Liqo's peering-user Role (in Liqo's namespace) or ClusterRole: exactly one, as liqoctl wants."""
    found = client.find(res, namespace, labels=pu.ROLES_SELECTOR)
    where = f" in namespace {namespace}" if namespace else ""
    if len(found) != 1:
        raise LiqoNotInstalled(
            f"the provider cluster at {client.describe} has {len(found) or 'no'} {res.kind} labelled"
            f" {pu.ROLES_SELECTOR}{where} (Liqo's chart installs one): install Liqo v1.x there, or fix"
            f" spec.remoteLiqoNamespace"
        )
    return str(found[0]["metadata"]["name"])


def _certificate(
    client: ClusterClient,
    spec: LiqoPeeringSpec,
    consumer_id: str,
    request: bytes,
    peering: str,
    owner: dict[str, str],
) -> bytes:
    """The certificate for ``request``: its CSR created (replacing another of the same name), approved as
    liqoctl approves it, and issued by the provider's signer."""
    name = pu.user_name(consumer_id)
    found = client.get(r.CSR, name)
    if found is not None and not pu.csr_is_for(found, request):
        client.delete(r.CSR, name)  # another minting's, or liqoctl's: a record only, the request is ours
        found = None
    if found is None:
        lifetime = spec.credentials.lifetime_seconds
        found = client.create(r.CSR, dress(pu.csr(consumer_id, request, lifetime, owner), _common(spec)))
    if not pu.csr_approved(found):
        found = client.replace_subresource(r.CSR, name, None, "approval", pu.approval(found, peering))
    cert = pu.issued(found) or _wait_issued(client, found)
    return cert


def _wait_issued(client: ClusterClient, csr: dict[str, Any]) -> bytes:
    """Watch the approved CSR until the signer issues its certificate (no polling), or give up this pass."""
    name = csr["metadata"]["name"]
    version = str(csr["metadata"].get("resourceVersion") or "")
    events = client.stream(r.CSR, None, version, fields=f"metadata.name={name}", timeout_seconds=ISSUE_TIMEOUT_SECONDS)
    for event in events:
        obj = event.get("object") or {}
        if event.get("type") not in ("ADDED", "MODIFIED"):
            continue
        refusal = pu.csr_refusal(obj)
        if refusal is not None:
            raise CertificateRefused(
                f"the provider cluster at {client.describe} refused CSR {name} ({refusal}); check its signer"
            )
        cert = pu.issued(obj)
        if cert is not None:
            return cert
    raise CertificateNotIssued(
        f"the provider cluster at {client.describe} approved CSR {name} but has not issued its certificate within"
        f" {ISSUE_TIMEOUT_SECONDS}s; check that its kube-controller-manager signs {pu.SIGNER}"
        " (--cluster-signing-cert-file and --cluster-signing-key-file)"
    )


# -- revocation ------------------------------------------------------------------------------------------
def revoke(
    local: ClusterClient,
    peering: dict[str, Any],
    spec: LiqoPeeringSpec,
    policy: KubeconfigPolicy,
    consumer_id: str | None,
    connect: Connect = connect_remote,
) -> list[str]:
    """Revoke the minted identity, as `liqoctl delete peering-user` does, and delete its Secret; returns what
    remains. With the bootstrap Secret, its kubeconfig deletes everything; without it, the identity deletes
    its own revoke ClusterRole, whose dependents (its every binding) the garbage collector then removes.
    Done once the provider refuses the minted credential.

    The minted Secret is found by the peering's name, so this works whether or not the status holds the
    cluster IDs; ``consumer_id`` None (never written to status): the one in the minted user's name."""
    meta = peering["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    secret_name = naming.minted_secret(name)
    secret = local.get(r.SECRET, secret_name, namespace)
    if secret is None:
        return []
    state = pu.MintState.of(secret)
    consumer_id = consumer_id or pu.consumer_of(state.user or state.pending_user or state.retired_user or "")
    if consumer_id is None:  # no user named yet: nothing was made on the provider
        _delete_minted_secret(local, namespace, secret_name)
        return []
    owner = naming.owner_labels(namespace, name)
    minted = _load(state, policy)
    # A peering that reaches its provider through a ClusterProfile now has no bootstrap: the minted identity
    # removes itself. The operator's cloud identity is always there.
    ref = spec.remote_kubeconfig_secret_ref
    present = ref is not None and local.get(r.SECRET, ref.name, namespace) is not None
    present = present or spec.remote_cluster is not None
    bootstrap = discovery.read_remote_kubeconfig(local, namespace, name, spec, policy) if present else None
    if not state.revoking:  # a later pass must not unpeer again with a credential that no longer works
        local.merge_patch(r.SECRET, secret_name, namespace, pu.revoking_patch())
    if bootstrap is not None:
        _delete_identity(connect, bootstrap, consumer_id, owner)
    elif minted is not None:
        _delete_identity(connect, minted, consumer_id, owner)
    if minted is not None and not _refused(connect, minted, consumer_id):
        return [f"the minted identity {state.user} on the provider (its RoleBindings being garbage-collected)"]
    if minted is None and bootstrap is None:
        log.warning(
            f"cannot revoke the minted identity of {namespace}/{name}: no usable kubeconfig; on the provider, delete"
            f" ClusterRole {pu.revoke_role_name(consumer_id)} and CSR {pu.user_name(consumer_id)}"
        )
    _delete_minted_secret(local, namespace, secret_name)
    log.info(f"revoked the minted provider credential {state.user} and deleted Secret {namespace}/{secret_name}")
    return []


def has_minted(local: ClusterClient, namespace: str, peering: str) -> bool:
    """Whether the peering has a minted Secret (a minting begun, done, or being revoked)."""
    return local.get(r.SECRET, naming.minted_secret(peering), namespace) is not None


@dataclass(frozen=True)
class Sources:
    """Where a peering's provider credential comes from, in its namespace: the Secret its provider source reads,
    the ClusterProfile (only where the policy has access providers: without them none is read), and the Secret
    it mints into (``mints``: spec.credentials.mint; without it, one left from when it did)."""

    secret: tuple[str, str] | None
    profile: tuple[str, str] | None
    minted_secret: str
    mints: bool


def sources(body: dict[str, Any], spec: LiqoPeeringSpec, policy: KubeconfigPolicy) -> Sources:
    meta = body["metadata"]
    namespace, secret, profile_ref = meta["namespace"], protection.secret_of(body), spec.remote_cluster_profile_ref
    return Sources(
        (namespace, secret) if secret is not None else None,
        (namespace, profile_ref.name) if profile_ref is not None and policy.access_providers.providers else None,
        naming.minted_secret(meta["name"]),
        spec.credentials.mint,
    )


def mint_state(local: ClusterClient, namespace: str, peering: str) -> pu.MintState:
    """What the peering's minted Secret holds: its kubeconfig, and whether it is being revoked (``revoking``:
    unpeering is over, see ``revoke``)."""
    return pu.MintState.of(local.get(r.SECRET, naming.minted_secret(peering), namespace, carries=pu.MINTED_SELECTOR))


def minted_kubeconfig(state: pu.MintState, policy: KubeconfigPolicy) -> RemoteKubeconfig | None:
    """The minted kubeconfig of a peering, if it has one."""
    return _load(state, policy)


def forget(local: ClusterClient, peering: dict[str, Any]) -> None:
    """Force-deleted (the provider is given up): the minted Secret goes, its identity stays on the provider."""
    meta = peering["metadata"]
    secret_name = naming.minted_secret(meta["name"])
    found = local.get(r.SECRET, secret_name, meta["namespace"])
    if found is None:
        return
    user = pu.MintState.of(found).user
    consumer_id = ((peering.get("status") or {}).get("localClusterID")) or "<consumer-id>"
    log.warning(
        f"force-deleted: the minted identity {user} stays on the provider; revoke it there by deleting ClusterRole"
        f" {pu.revoke_role_name(consumer_id)} (or liqoctl delete peering-user --consumer-cluster-id {consumer_id})"
    )
    _delete_minted_secret(local, meta["namespace"], secret_name)


def _find_secret(local: ClusterClient, namespace: str, name: str, labels: str | None = None) -> dict[str, Any] | None:
    """A Secret that may well be absent, from the cache of an informer that holds it once synced (the peering's
    routes watch the kubeconfig Secret by name, the minted ones by label): a get would ask the API server on
    every pass to learn it is still not there."""
    found = local.find(r.SECRET, namespace, labels=labels, fields=f"metadata.name={name}")
    return next((s for s in found if s["metadata"]["name"] == name), None)


def _delete_minted_secret(local: ClusterClient, namespace: str, name: str) -> None:
    """Its protection released first (only this peering uses it), then the Secret."""
    local.edit_finalizers(r.SECRET, name, namespace, protection.removing)
    local.delete(r.SECRET, name, namespace)


def _load(state: pu.MintState, policy: KubeconfigPolicy) -> RemoteKubeconfig | None:
    if state.kubeconfig is None:
        return None
    try:
        return load_remote_kubeconfig(
            state.kubeconfig, context=None, allow_exec=policy.allow_exec, allow_insecure_tls=policy.allow_insecure_tls
        )
    except PeeringError:
        return None


def _delete_identity(connect: Connect, kubeconfig: RemoteKubeconfig, consumer_id: str, owner: dict[str, str]) -> None:
    """Delete the revoke ClusterRole (the garbage collector takes its bindings) and any CSR left, when they are
    this peering's: their names are the consumer's, and another peering's (or liqoctl's) stay."""
    client = connect(kubeconfig)
    try:
        for res, obj_name in ((r.CLUSTER_ROLE, pu.revoke_role_name(consumer_id)), (r.CSR, pu.user_name(consumer_id))):
            # Forbidden: the minted identity, already without its rights, or never allowed the CSR (deleted
            # once issued anyway).
            with contextlib.suppress(AccessRefused):
                if _ours(client, res, obj_name, owner):
                    client.delete(res, obj_name)
    finally:
        client.close()


def _ours(client: ClusterClient, res: r.Resource, name: str, owner: dict[str, str]) -> bool:
    """Whether the provider's object is labelled as this peering's. One the client may not read counts as
    ours: the minted identity may only delete its own revoke ClusterRole, which its bindings name."""
    try:
        found = client.get(res, name)
    except AccessRefused:
        return True
    if found is None:
        return False
    labels = (found.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in owner.items())


def _refused(connect: Connect, minted: RemoteKubeconfig, consumer_id: str) -> bool:
    """Whether the provider refuses the minted credential (401 or 403) what it granted: its tenant namespace."""
    client = connect(minted)
    try:
        client.get(r.NAMESPACE, naming.tenant_namespace(consumer_id))
    except AccessRefused:
        return True
    finally:
        client.close()
    return False


def _revoke_switched_off(
    local: ClusterClient, peering: dict[str, Any], spec: LiqoPeeringSpec, bootstrap: RemoteKubeconfig, connect: Connect
) -> None:
    """spec.credentials.mint turned off: the bootstrap kubeconfig is the credential again; revoke the minted one."""
    meta = peering["metadata"]
    secret_name = naming.minted_secret(meta["name"])
    if _find_secret(local, meta["namespace"], secret_name, pu.MINTED_SELECTOR) is None:
        return
    consumer_id = discovery.cluster_id(local, spec.liqo_namespace)
    _delete_identity(connect, bootstrap, consumer_id, naming.owner_labels(meta["namespace"], meta["name"]))
    _delete_minted_secret(local, meta["namespace"], secret_name)
    log.info(f"spec.credentials.mint is off: revoked the minted credential and deleted Secret {secret_name}")
