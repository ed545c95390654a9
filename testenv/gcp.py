"""What a GKE provider's authentication meets in Google Cloud, for a LiqoPeering that reaches it with the
operator's own workload identity (spec.remoteCluster, provider gcp).

Real: on the operator's side, google-auth (Application Default Credentials) finding the GKE metadata server,
reading the service account and fetching its access token; on the provider, kube-apiserver's webhook token
authenticator asking about every bearer token, with its cache of verdicts.

Stood in, on loopback only (GKE's own verifier is Google's, and cannot run here):
- **The GKE metadata server** (``MetadataServer``): google-auth finds it through ``GCE_METADATA_HOST`` and
  ``GCE_METADATA_IP``. It answers only requests with ``Metadata-Flavor: Google`` (and says so in its answers,
  which google-auth checks when it probes), as GKE's does: the project, the service account of the Pod and an
  access token for it, for the Google service account that Pod's Kubernetes ServiceAccount is bound to
  (Workload Identity). Its tokens are random and opaque, and it remembers each with its account, scopes and
  expiry. What it cannot show: how GKE tells Pods apart (by their address; here it serves one ServiceAccount),
  IAM's check of roles/iam.workloadIdentityUser, and the token's real format and lifetime policy.
- **GKE's token verifier** (``TokenVerifier``): the provider API server's webhook token authenticator
  (TokenReview over HTTPS, ``webhook_kubeconfig``). It accepts only tokens the metadata server issued, not
  revoked nor expired, with a scope GKE takes (cloud-platform or userinfo.email), and maps each to its Google
  service account's email as the user, as GKE does. What it cannot show: Google's token introspection, and
  GKE's IAM authorization (roles/container.*) before Kubernetes RBAC.
- **Google's STS and IAM credentials API** (``GoogleSts``), for Workload Identity Federation outside GKE: a
  CONNECT proxy for Google's API hosts, terminating TLS with its own CA, that exchanges a subject token it is
  told is valid for a federated token, and gives that principal a Google service account's token.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import secrets
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from testenv import loopback
from testenv.kube import Kube, Res
from testenv.localk8s import pki
from testenv.loopback import LOOPBACK

PROJECT = "edge-project"
# GKE's verifier takes a token with either scope (gke-gcloud-auth-plugin asks for both).
GKE_SCOPES = frozenset(
    {"https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email"}
)
METADATA_ROOT = "/computeMetadata/v1/"
ACCOUNT_PATH = re.compile(r"^/computeMetadata/v1/instance/service-accounts/(?P<account>[^/]+)/(?P<rest>.*)$")
MAX_BODY = 64 * 1024
TOKEN_REVIEW = Res("authentication.k8s.io", "v1", "tokenreviews")


@dataclass(frozen=True)
class AccessToken:
    """An access token the metadata server issued, and for whom."""

    token: str
    email: str  # the Google service account's
    scopes: frozenset[str]
    expiry: datetime.datetime


@dataclass
class MetadataServer:
    """The GKE metadata server stand-in for a Pod running as ``service_account`` ("namespace/name"), bound by
    Workload Identity (``bindings``) to a Google service account's email."""

    service_account: str
    bindings: dict[str, str]  # "namespace/name" -> Google service account email
    lifetime: datetime.timedelta = datetime.timedelta(hours=1)
    issued: dict[str, AccessToken] = field(default_factory=dict)  # live: not revoked
    handed_out: list[AccessToken] = field(default_factory=list)  # every token, in order, revoked ones too
    refused: list[str] = field(default_factory=list)  # why it refused, in order

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.server = loopback.serve(_metadata_handler(self), "gke-metadata-server")
        self.port = self.server.server_address[1]

    @property
    def environment(self) -> dict[str, str]:
        """The variables that point google-auth here, in place of metadata.google.internal (169.254.169.254)."""
        address = f"{LOOPBACK}:{self.port}"
        return {"GCE_METADATA_HOST": address, "GCE_METADATA_IP": address}

    @property
    def email(self) -> str | None:
        with self._lock:
            return self.bindings.get(self.service_account)

    def unbind(self) -> None:
        """The ServiceAccount's Workload Identity binding removed."""
        with self._lock:
            self.bindings.pop(self.service_account, None)

    def bind(self, email: str) -> None:
        with self._lock:
            self.bindings[self.service_account] = email

    def issue(self, scopes: frozenset[str]) -> AccessToken | None:
        """A token of the Google service account the ServiceAccount is bound to; None without a binding."""
        email = self.email
        return None if email is None else self.issue_for(email, scopes)

    def issue_for(self, email: str, scopes: frozenset[str]) -> AccessToken:
        """A token of that Google service account, remembered here, the one record of Google's access tokens the
        verifier reads (the IAM credentials stand-in issues its own through it)."""
        token = AccessToken(
            "ya29." + secrets.token_urlsafe(48),
            email,
            scopes,
            datetime.datetime.now(datetime.UTC) + self.lifetime,
        )
        with self._lock:
            self.issued[token.token] = token
            self.handed_out.append(token)
        return token

    def revoke_all(self) -> list[AccessToken]:
        """Every token issued so far forgotten, as if revoked: the verifier refuses them from now on."""
        with self._lock:
            gone = list(self.issued.values())
            self.issued.clear()
        return gone

    def lookup(self, token: str) -> AccessToken | None:
        """The token, if issued, not revoked and not expired."""
        with self._lock:
            found = self.issued.get(token)
        if found is None or found.expiry <= datetime.datetime.now(datetime.UTC):
            return None
        return found

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, str, str]:
        """(status, content type, body) for one GET."""
        if headers.get("metadata-flavor") != "Google":
            return self._refuse(403, "Missing Metadata-Flavor:Google header.")
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/":  # google-auth's probe of the server's IP
            return 200, "application/text", "computeMetadata/\n"
        if url.path == METADATA_ROOT + "project/project-id":
            return 200, "application/text", PROJECT
        found = ACCOUNT_PATH.match(url.path)
        email = self.email
        if found is None:
            return self._refuse(404, f"no such metadata: {url.path}")
        if found["account"] not in ("default", email):
            return self._refuse(404, f"no service account {found['account']}")
        if email is None:
            # GKE's answer for a ServiceAccount without a Workload Identity binding it can use.
            return self._refuse(
                403, f"the Kubernetes ServiceAccount {self.service_account} has no Google service account"
            )
        if found["rest"] == "" and query.get("recursive") == ["true"]:
            body: dict[str, Any] = {"aliases": ["default"], "email": email, "scopes": sorted(GKE_SCOPES)}
            return 200, "application/json", json.dumps(body)
        if found["rest"] == "email":
            return 200, "application/text", email
        if found["rest"] == "token":
            scopes = frozenset(",".join(query.get("scopes", [])).split(",")) - {""}
            token = self.issue(scopes or GKE_SCOPES)
            if token is None:
                return self._refuse(403, "no Google service account")
            seconds = int((token.expiry - datetime.datetime.now(datetime.UTC)).total_seconds())
            body = {"access_token": token.token, "expires_in": seconds, "token_type": "Bearer"}
            return 200, "application/json", json.dumps(body)
        return self._refuse(404, f"no such metadata: {url.path}")

    def _refuse(self, status: int, why: str) -> tuple[int, str, str]:
        with self._lock:
            self.refused.append(why)
        return status, "text/plain", why

    def stop(self) -> None:
        loopback.stop(self.server)


def _metadata_handler(metadata: MetadataServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, content_type, body = metadata.answer(self.path, headers)
            data = body.encode()
            self.send_response(status)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@dataclass
class TokenVerifier:
    """GKE's token verifier stand-in: a webhook token authenticator (TokenReview over HTTPS) that accepts the
    metadata server's live tokens and maps each to its Google service account's email."""

    dir: Path
    metadata: MetadataServer
    verified: list[str] = field(default_factory=list)  # the users it vouched for, in order
    refused: list[str] = field(default_factory=list)  # why it refused, in order

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        ca = pki.new_ca("gke token verifier stand-in")
        leaf = pki.new_serving_cert(ca, "gke-token-verifier", ["localhost"], [LOOPBACK])
        self.ca_file = self.dir / "verifier-ca.crt"
        self.ca_file.write_bytes(pki.cert_pem(ca.cert))
        (self.dir / "verifier.crt").write_bytes(pki.cert_pem(leaf.cert))
        (self.dir / "verifier.key").write_bytes(pki.key_pem(leaf.key))
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.dir / "verifier.crt", self.dir / "verifier.key")
        self.server = loopback.serve(_verifier_handler(self), "gke-token-verifier", tls)
        self.port = self.server.server_address[1]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "gke-token-verifier",
                    "cluster": {
                        "server": f"https://{LOOPBACK}:{self.port}/authenticate",
                        "certificate-authority": str(self.ca_file),
                    },
                }
            ],
            "users": [{"name": "kube-apiserver", "user": {}}],
            "contexts": [{"name": "webhook", "context": {"cluster": "gke-token-verifier", "user": "kube-apiserver"}}],
            "current-context": "webhook",
        }
        self.webhook_kubeconfig = self.dir / "webhook.kubeconfig"
        self.webhook_kubeconfig.write_text(yaml.safe_dump(config))

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to one TokenReview, in the API version it was asked in."""
        token = str((body.get("spec") or {}).get("token") or "")
        found = self.metadata.lookup(token)
        status: dict[str, Any]
        if found is None:
            status = {"authenticated": False, "error": "the token is unknown, revoked or expired"}
        elif not found.scopes & GKE_SCOPES:
            status = {"authenticated": False, "error": "the token has no scope GKE takes"}
        else:
            status = {"authenticated": True, "user": {"username": found.email, "uid": found.email}}
        with self._lock:
            if status["authenticated"]:
                self.verified.append(found.email if found else "")
            else:
                self.refused.append(status["error"])
        return {
            "apiVersion": body.get("apiVersion", "authentication.k8s.io/v1"),
            "kind": "TokenReview",
            "status": status,
        }

    def stop(self) -> None:
        loopback.stop(self.server)


def _verifier_handler(verifier: TokenVerifier) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            # The API server adds ?timeout=... to the webhook's URL.
            if urllib.parse.urlsplit(self.path).path != "/authenticate" or not 0 < length <= MAX_BODY:
                status, answer = 400, {"message": "a TokenReview is POSTed to /authenticate"}
            else:
                try:
                    status, answer = 200, verifier.review(json.loads(self.rfile.read(length)))
                except ValueError:
                    status, answer = 400, {"message": "not JSON"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


# Google's API hosts that Workload Identity Federation calls: STS for the exchange, the IAM credentials API
# for the service account's token, and Resource Manager, which google-auth asks for the pool's project.
GOOGLE_API_HOSTS = frozenset(
    {"sts.googleapis.com", "iamcredentials.googleapis.com", "cloudresourcemanager.googleapis.com"}
)
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
GENERATE_ACCESS_TOKEN = re.compile(r"^/v1/projects/-/serviceAccounts/(?P<email>[^/:]+):generateAccessToken$")


@dataclass
class GoogleSts:
    """Google's STS and IAM credentials API stood in for Workload Identity Federation: an HTTPS proxy on
    loopback (``HTTPS_PROXY``, its CA in ``REQUESTS_CA_BUNDLE``) that takes CONNECT for Google's API hosts
    above only and terminates TLS as them. STS exchanges a subject token that ``review`` vouches for, for the
    pool provider's ``audience``, for a federated token; the IAM credentials API gives a federated principal the
    token of a Google service account it may act as (``impersonation``: roles/iam.workloadIdentityUser), issued
    through ``tokens``. Resource Manager answers 403, as to an identity without resourcemanager.projects.get.
    What it cannot show: the pool provider's attribute mapping and conditions, and the JWT's own checks (issuer,
    signature), which ``review`` does instead."""

    dir: Path
    tokens: MetadataServer
    audience: str  # //iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<p>
    review: Callable[[str], str | None]  # a subject token -> its subject (system:serviceaccount:<ns>:<name>)
    impersonation: dict[str, str]  # subject -> the Google service account email it may act as
    lifetime: datetime.timedelta = datetime.timedelta(hours=1)
    federated: dict[str, str] = field(default_factory=dict)  # federated token -> subject
    refused: list[str] = field(default_factory=list)  # why it refused, in order

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        ca = pki.new_ca("google apis stand-in")
        self.ca_file = self.dir / "google-ca.crt"
        self.ca_file.write_bytes(pki.cert_pem(ca.cert))
        hosts = sorted(GOOGLE_API_HOSTS)
        leaf = pki.new_serving_cert(ca, hosts[0], hosts, [])
        (self.dir / "google.crt").write_bytes(pki.cert_pem(leaf.cert))
        (self.dir / "google.key").write_bytes(pki.key_pem(leaf.key))
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(self.dir / "google.crt", self.dir / "google.key")
        self.server = loopback.serve(_google_proxy_handler(self), "google-apis-stand-in")
        self.port = self.server.server_address[1]

    def environment(self, credential_config: Path) -> dict[str, str]:
        """The variables for google-auth (through requests) to use the credential configuration, through here."""
        return {
            "GOOGLE_APPLICATION_CREDENTIALS": str(credential_config),
            "HTTPS_PROXY": f"http://{LOOPBACK}:{self.port}",
            "REQUESTS_CA_BUNDLE": str(self.ca_file),
            "NO_PROXY": f"{LOOPBACK},localhost,198.18.0.0/15",
        }

    def credential_config(self, subject_token_file: Path, email: str) -> dict[str, Any]:
        """What `gcloud iam workload-identity-pools create-cred-config --service-account <email>
        --credential-source-file <file>` writes."""
        return {
            "universe_domain": "googleapis.com",
            "type": "external_account",
            "audience": self.audience,
            "subject_token_type": JWT_TOKEN_TYPE,
            "token_url": "https://sts.googleapis.com/v1/token",
            "service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/"
            f"serviceAccounts/{email}:generateAccessToken",
            "credential_source": {"file": str(subject_token_file), "format": {"type": "text"}},
        }

    def answer(
        self, host: str, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        path = urllib.parse.urlsplit(target).path
        if host == "sts.googleapis.com" and (method, path) == ("POST", "/v1/token"):
            return self._exchange(urllib.parse.parse_qs(body.decode("latin-1")))
        found = GENERATE_ACCESS_TOKEN.match(path)
        if host == "iamcredentials.googleapis.com" and method == "POST" and found:
            return self._generate(found["email"], headers.get("authorization", ""), body)
        return self._refuse(403, f"{method} {host}{path}: permission denied", "PERMISSION_DENIED")

    def _exchange(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        one = {k: v[0] for k, v in form.items() if len(v) == 1}
        if one.get("grant_type") != TOKEN_EXCHANGE or one.get("requested_token_type") != ACCESS_TOKEN_TYPE:
            return self._oauth_error("unsupported_grant_type", "not a token exchange for an access token")
        if one.get("audience") != self.audience:
            return self._oauth_error("invalid_target", "the audience is not this pool's provider")
        if one.get("subject_token_type") != JWT_TOKEN_TYPE:
            return self._oauth_error("invalid_request", "the subject token is not a JWT")
        subject = self.review(one.get("subject_token", ""))
        if subject is None:
            return self._oauth_error("invalid_grant", "the subject token is not valid for this provider")
        token = "fed." + secrets.token_urlsafe(48)
        with self._lock:
            self.federated[token] = subject
        seconds = int(self.lifetime.total_seconds())
        return 200, {
            "access_token": token,
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": seconds,
        }

    def _generate(self, email: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        with self._lock:
            subject = self.federated.get(authorization.removeprefix("Bearer "))
            allowed = self.impersonation.get(subject or "")
        if subject is None:
            return self._refuse(401, "the request has no valid federated token", "UNAUTHENTICATED")
        if allowed != email:
            return self._refuse(403, f"{subject} may not act as {email}", "PERMISSION_DENIED")
        try:
            scopes = frozenset(json.loads(body or b"{}").get("scope") or [])
        except ValueError:
            return self._refuse(400, "not JSON", "INVALID_ARGUMENT")
        issued = self.tokens.issue_for(email, scopes)
        return 200, {"accessToken": issued.token, "expireTime": issued.expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}

    def _oauth_error(self, error: str, why: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.refused.append(why)
        return 400, {"error": error, "error_description": why}

    def _refuse(self, status: int, why: str, code: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.refused.append(why)
        return status, {"error": {"code": status, "message": why, "status": code}}

    def stop(self) -> None:
        loopback.stop(self.server)


def _google_proxy_handler(google: GoogleSts) -> type[BaseHTTPRequestHandler]:
    return loopback.connect_proxy(
        lambda host, port: host in GOOGLE_API_HOSTS and port == "443",
        "the Google APIs stand-in tunnels to Google's API hosts only",
        lambda: google.tls,
        lambda conn, host: _serve_google(google, conn, host),
    )


def _serve_google(google: GoogleSts, conn: ssl.SSLSocket, host: str) -> None:
    """One HTTP/1.1 exchange on the tunnel, then the connection closed (the client opens another)."""
    reader = conn.makefile("rb")
    request_line = reader.readline(8192).decode("latin-1").strip()
    headers: dict[str, str] = {}
    while len(headers) < 100:
        line = reader.readline(8192).decode("latin-1")
        if line in ("\r\n", "\n", ""):
            break
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    method, target, _ = [*request_line.split(" "), "", "", ""][:3]
    length = int(headers.get("content-length") or 0)
    if not 0 <= length <= MAX_BODY:
        raise ValueError("request body too large")
    status, answer = google.answer(host, method, target, headers, reader.read(length) if length else b"")
    data = json.dumps(answer).encode()
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    conn.sendall(head.encode() + data)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def pool_audience(provider_audience: str) -> str:
    """The audience a pool's OIDC provider takes by default in the subject token: its name as an https URL."""
    return "https:" + provider_audience


def projected_token(consumer: Kube, namespace: str, service_account: str, audience: str, path: Path) -> Path:
    """A token of the ServiceAccount for the pool provider's audience, written where the chart's extraVolumes
    would project it."""
    request: Any = {"spec": {"audiences": [audience], "expirationSeconds": 3600}}
    issued: Any = k8s.CoreV1Api(consumer.api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    path.write_text(str(issued.status.token))
    path.chmod(0o600)
    return path


def token_review(consumer: Kube, audience: str) -> Callable[[str], str | None]:
    """The pool provider's check of a subject token, done by the consumer's API server (TokenReview): its
    subject, if it is a valid token for ``audience``."""

    def review(token: str) -> str | None:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        status = consumer.create(TOKEN_REVIEW, body).get("status") or {}
        if not status.get("authenticated") or audience not in (status.get("audiences") or []):
            return None
        return str((status.get("user") or {}).get("username") or "") or None

    return review
