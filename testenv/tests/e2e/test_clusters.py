"""The local clusters are real, independent Kubernetes control planes."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import kubernetes.client as k8s
import kubernetes.config
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes.client.exceptions import ApiException

from testenv.localk8s import LocalCluster
from testenv.localk8s.cluster import kubeconfig_dict

T = TypeVar("T")


def eventually(fn: Callable[[], T | None], timeout: float = 60, what: str = "condition") -> T:
    """Poll fn until it returns something other than None/False."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def status_of(call: Callable[[], object]) -> int:
    try:
        call()
    except ApiException as e:
        return int(e.status)
    return 200


def whoami(client: k8s.ApiClient) -> tuple[str, list[str]]:
    """User name and groups the API server authenticated this client as."""
    review = k8s.AuthenticationV1Api(client).create_self_subject_review(k8s.V1SelfSubjectReview())
    assert review.status is not None and review.status.user_info is not None
    info = review.status.user_info
    return str(info.username), list(info.groups or [])


@pytest.fixture(scope="module")
def consumer(local_clusters: dict[str, LocalCluster]) -> Iterator[k8s.ApiClient]:
    with local_clusters["consumer"].api_client() as client:
        yield client


@pytest.fixture(scope="module")
def provider(local_clusters: dict[str, LocalCluster]) -> Iterator[k8s.ApiClient]:
    with local_clusters["provider"].api_client() as client:
        yield client


def test_version_is_stamped(consumer: k8s.ApiClient) -> None:
    info = k8s.VersionApi(consumer).get_code()
    assert info.git_version.startswith("v1.")
    assert info.git_version != "v0.0.0"


def test_admin_kubeconfig_is_self_contained(local_clusters: dict[str, LocalCluster]) -> None:
    for cluster in local_clusters.values():
        cfg = yaml.safe_load(cluster.kubeconfig.read_text())
        assert cfg["clusters"][0]["cluster"]["server"] == cluster.server
        assert "certificate-authority-data" in cfg["clusters"][0]["cluster"]
        assert set(cfg["users"][0]["user"]) == {"client-certificate-data", "client-key-data"}
        with kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig)) as client:
            k8s.CoreV1Api(client).read_namespace("default")


def test_clusters_are_independent(
    local_clusters: dict[str, LocalCluster], consumer: k8s.ApiClient, provider: k8s.ApiClient
) -> None:
    assert local_clusters["consumer"].server != local_clusters["provider"].server
    name = unique("only-in-consumer")
    k8s.CoreV1Api(consumer).create_namespaced_config_map(
        "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name), data={"k": "v"})
    )
    assert k8s.CoreV1Api(consumer).read_namespaced_config_map(name, "default").data == {"k": "v"}
    assert status_of(lambda: k8s.CoreV1Api(provider).read_namespaced_config_map(name, "default")) == 404
    # Different CAs, too: the consumer's admin credentials are worthless on the provider.
    consumer_ca = local_clusters["consumer"].ca_cert.read_bytes()
    assert consumer_ca != local_clusters["provider"].ca_cert.read_bytes()


def test_rbac_denies_unprivileged_user(local_clusters: dict[str, LocalCluster], consumer: k8s.ApiClient) -> None:
    cluster = local_clusters["consumer"]
    user = unique("alice")
    kubeconfig = cluster.user_kubeconfig(user, groups=["developers"])
    with kubernetes.config.new_client_from_config(config_file=str(kubeconfig)) as client:
        assert status_of(lambda: k8s.CoreV1Api(client).list_namespaced_secret("default")) == 403
        assert whoami(client) == (user, ["developers", "system:authenticated"])

        # And RBAC grants are honoured: bind a role, and the same request is allowed.
        rbac = k8s.RbacAuthorizationV1Api(consumer)
        rbac.create_namespaced_role(
            "default",
            k8s.V1Role(
                metadata=k8s.V1ObjectMeta(name=user),
                rules=[k8s.V1PolicyRule(api_groups=[""], resources=["secrets"], verbs=["list"])],
            ),
        )
        rbac.create_namespaced_role_binding(
            "default",
            k8s.V1RoleBinding(
                metadata=k8s.V1ObjectMeta(name=user),
                role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=user),
                subjects=[k8s.RbacV1Subject(api_group="rbac.authorization.k8s.io", kind="User", name=user)],
            ),
        )
        eventually(
            lambda: status_of(lambda: k8s.CoreV1Api(client).list_namespaced_secret("default")) == 200,
            what="the RoleBinding to take effect",
        )


def test_namespace_deletion_is_finalized(consumer: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(consumer)
    ns = unique("doomed")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    core.create_namespaced_config_map(ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="content")))
    # The service account controller populates every new namespace.
    eventually(
        lambda: status_of(lambda: core.read_namespaced_service_account("default", ns)) == 200,
        what="the default ServiceAccount in the new namespace",
    )
    core.delete_namespace(ns)
    # Only kube-controller-manager's namespace controller empties the namespace and removes
    # the `kubernetes` finalizer; without it the namespace would stay Terminating forever.
    eventually(lambda: status_of(lambda: core.read_namespace(ns)) == 404, what=f"namespace {ns} to go away")


def test_garbage_collector_deletes_dependents(consumer: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(consumer)
    owner = core.create_namespaced_config_map(
        "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=unique("owner")))
    )
    dependent = unique("dependent")
    assert owner.metadata is not None and owner.metadata.name and owner.metadata.uid
    ref = k8s.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name, uid=owner.metadata.uid)
    core.create_namespaced_config_map(
        "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=dependent, owner_references=[ref]))
    )
    core.delete_namespaced_config_map(owner.metadata.name, "default")
    eventually(
        lambda: status_of(lambda: core.read_namespaced_config_map(dependent, "default")) == 404,
        what="the garbage collector to delete the dependent",
    )


def test_service_account_tokens_authenticate(local_clusters: dict[str, LocalCluster]) -> None:
    cluster = local_clusters["provider"]
    with cluster.api_client() as admin:
        request = k8s.CoreV1Api(admin).create_namespaced_service_account_token(
            "default", "default", k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
        )
    assert request.status is not None and request.status.token
    token: str = request.status.token
    cfg = k8s.Configuration(host=cluster.server, ssl_ca_cert=str(cluster.ca_cert))
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    with k8s.ApiClient(cfg) as client:
        username, _ = whoami(client)
    assert username == "system:serviceaccount:default:default"


def _pem(data: bytes | str) -> bytes:
    """CSR certificate as the client returns it: raw PEM bytes or base64 text."""
    if isinstance(data, bytes):
        return data if data.startswith(b"-----") else base64.b64decode(data)
    return base64.b64decode(data)


def test_csr_for_kube_apiserver_client_signer(local_clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    cluster = local_clusters["consumer"]
    user = unique("bob")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    csr_pem = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "csr-users"),
                    x509.NameAttribute(NameOID.COMMON_NAME, user),
                ]
            )
        )
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
    )
    with cluster.api_client() as admin:
        certs = k8s.CertificatesV1Api(admin)
        csr = certs.create_certificate_signing_request(
            k8s.V1CertificateSigningRequest(
                metadata=k8s.V1ObjectMeta(name=user),
                spec=k8s.V1CertificateSigningRequestSpec(
                    request=base64.b64encode(csr_pem).decode(),
                    signer_name="kubernetes.io/kube-apiserver-client",
                    usages=["client auth"],
                    expiration_seconds=3600,
                ),
            )
        )
        csr.status = k8s.V1CertificateSigningRequestStatus(
            conditions=[
                k8s.V1CertificateSigningRequestCondition(
                    type="Approved", status="True", reason="E2ETest", message="approved by test"
                )
            ]
        )
        certs.replace_certificate_signing_request_approval(user, csr)

        def issued_certificate() -> bytes | None:
            status = certs.read_certificate_signing_request(user).status
            return _pem(status.certificate) if status and status.certificate else None

        cert_pem = eventually(
            issued_certificate,
            what="kube-controller-manager's csrsigning controller to issue the certificate",
        )
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user

    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    kubeconfig = tmp_path / "bob.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            kubeconfig_dict(cluster.name, cluster.server, cluster.ca_cert.read_bytes(), user, cert_pem, key_pem)
        )
    )
    with kubernetes.config.new_client_from_config(config_file=str(kubeconfig)) as client:
        assert whoami(client) == (user, ["csr-users", "system:authenticated"])
        # Authenticated, yet unauthorized: the cert carries identity, not privileges.
        assert status_of(lambda: k8s.CoreV1Api(client).list_namespaced_secret("default")) == 403
