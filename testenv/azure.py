"""What an AKS provider's authentication meets in Azure, for a LiqoPeering that reaches it with the operator's
own Microsoft Entra Workload ID (spec.remoteCluster, provider azure).

Real: the verifier, kube-apiserver's own JWT authenticator (``--authentication-config``, a ``jwt`` issuer
with Entra ID's v1 issuer URL, its discovery and keys fetched from the stand-in below over TLS with its CA),
mapping the token's ``oid`` to a Kubernetes user as AKS with Microsoft Entra ID and Kubernetes RBAC does; and,
on the operator's side, azure-identity's WorkloadIdentityCredential with its defaults (the authority host
login.microsoftonline.com, its own requests, reading the projected token file).

Stood in, on loopback only:
- **Microsoft Entra ID** (``EntraId``): azure-identity's WorkloadIdentityCredential POSTs a client-credentials
  request, the ServiceAccount token as client assertion, to ``https://login.microsoftonline.com/<tenant>/
  oauth2/v2.0/token`` (it fetches no instance or OpenID metadata first: that is msal's, which this credential
  does not use). Its process is given ``HTTPS_PROXY`` pointing here and trusts this CA (``REQUESTS_CA_BUNDLE``);
  the proxy takes CONNECT for login.microsoftonline.com only and terminates TLS as that host. It checks the
  assertion (``check_assertion``: on the consumer, a TokenReview for audience api://AzureADTokenExchange, the
  consumer's verdict on its own token, as Entra ID checks it with the issuer's published keys), matches its
  issuer, subject and audience with the identity's federated credentials (else AADSTS70021, as Entra ID),
  takes only the AKS server application's scope, and answers an RS256 access token in Entra ID's v1 form
  (iss ``https://sts.windows.net/<tenant>/``, aud the AKS server application, oid, tid, appid, exp). The API
  server reads its OpenID discovery and keys directly at its loopback address (``discovery_url``), the
  document's ``jwks_uri`` pointing there too. What it cannot show: Entra ID's other checks (Conditional
  Access for workload identities, the identity's tenant policies), the group and role claims of real tokens,
  token lifetimes Entra ID chooses, and the AKS guard or Azure RBAC webhook (Azure RBAC for Kubernetes).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import secrets
import ssl
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kubernetes import client as k8s

from testenv import loopback
from testenv.kube import Kube, Res
from testenv.localk8s import pki
from testenv.loopback import LOOPBACK

TENANT = "7f3c2a10-5d4e-4b8a-9c1f-2e6d8a4b0c11"
SUBSCRIPTION = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"
AUTHORITY = "login.microsoftonline.com"
# The AKS Microsoft Entra server application, the audience of every AKS cluster's tokens (kubelogin's server id).
AKS_SERVER_APP = "6dae42f8-4368-4678-94ff-3960e28e3630"
# The audience of the ServiceAccount token that Workload ID exchanges, as AKS's webhook projects it.
EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"
ISSUER = f"https://sts.windows.net/{TENANT}/"  # Entra ID's v1 tokens, which the AKS server application takes
TOKEN_REVIEW = Res("authentication.k8s.io", "v1", "tokenreviews")
MAX_BODY = 64 * 1024  # a token request is a few KiB
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

Claims = dict[str, Any]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(key: rsa.RSAPrivateKey, kid: str, claims: Mapping[str, Any]) -> str:
    """An RS256 JWT of ``claims``."""
    header = _b64url(json.dumps({"typ": "JWT", "alg": "RS256", "kid": kid}).encode())
    body = _b64url(json.dumps(dict(claims)).encode())
    signature = key.sign(f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{body}.{_b64url(signature)}"


def verify_jwt(token: str, keys: Mapping[str, rsa.RSAPublicKey]) -> Claims | None:
    """The claims of an RS256 JWT signed by one of ``keys`` (by kid) and within its lifetime; None otherwise."""
    try:
        header, body, signature = token.split(".")
        head = json.loads(_unb64url(header))
        key = keys.get(head.get("kid", ""))
        if key is None or head.get("alg") != "RS256":
            return None
        key.verify(_unb64url(signature), f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        claims: Claims = json.loads(_unb64url(body))
    except Exception:  # any malformed or forged token is simply not valid
        return None
    now = datetime.datetime.now(datetime.UTC).timestamp()
    return claims if claims.get("nbf", 0) - 300 <= now < claims.get("exp", 0) else None


def unverified_claims(token: str) -> Claims:
    """The payload of a JWT, read without checking it (only after something else has)."""
    parts = token.split(".")
    return dict(json.loads(_unb64url(parts[1]))) if len(parts) == 3 else {}


def jwk(key: rsa.RSAPublicKey, kid: str) -> dict[str, Any]:
    numbers = key.public_numbers()
    return {
        "kty": "RSA",
        "use": "sig",
        "alg": "RS256",
        "kid": kid,
        "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
        "e": _b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")),
    }


@dataclass(frozen=True)
class FederatedCredential:
    """A federated identity credential: Entra ID takes a token from ``issuer`` about ``subject`` for
    ``audience`` as the identity's own assertion."""

    issuer: str
    subject: str  # system:serviceaccount:<namespace>:<name>
    audience: str = EXCHANGE_AUDIENCE


@dataclass
class Identity:
    """A user-assigned managed identity (or an app registration's service principal)."""

    client_id: str
    object_id: str
    federated: list[FederatedCredential]


def token_review_check(consumer: Kube) -> Callable[[str], Claims | None]:
    """The consumer's verdict on a ServiceAccount token for Workload ID's audience (TokenReview), and the
    claims it carries once the consumer vouched for it."""

    def check(token: str) -> Claims | None:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [EXCHANGE_AUDIENCE]},
        }
        status = consumer.create(TOKEN_REVIEW, review).get("status") or {}
        if not status.get("authenticated") or EXCHANGE_AUDIENCE not in (status.get("audiences") or []):
            return None
        return unverified_claims(token)

    return check


class _TlsServer(ThreadingHTTPServer):
    """HTTPS on loopback: each connection's handshake is made in its own thread."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext, handler: type[BaseHTTPRequestHandler]) -> None:
        self.tls = tls
        super().__init__((LOOPBACK, 0), handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            super().finish_request(self.tls.wrap_socket(request, server_side=True), client_address)


@dataclass
class EntraId:
    """The Microsoft Entra ID stand-in: a token endpoint behind a CONNECT proxy for login.microsoftonline.com,
    and OpenID discovery and keys served directly for the API server's JWT authenticator."""

    dir: Path
    check_assertion: Callable[[str], Claims | None]
    identities: dict[str, Identity]  # by client ID
    lifetime: datetime.timedelta = datetime.timedelta(hours=1)
    issued: list[Claims] = field(default_factory=list)  # the claims of the tokens its endpoint answered, in order
    handed_out: list[str] = field(default_factory=list)  # those tokens
    refused: list[str] = field(default_factory=list)  # why it refused, in order

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = pki.new_ca("entra id stand-in")
        self.ca_file = self.dir / "entra-ca.crt"
        self.ca_file.write_bytes(pki.cert_pem(self.ca.cert))
        leaf = pki.new_serving_cert(self.ca, AUTHORITY, [AUTHORITY], [LOOPBACK])
        (self.dir / "entra.crt").write_bytes(pki.cert_pem(leaf.cert))
        (self.dir / "entra.key").write_bytes(pki.key_pem(leaf.key))
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(self.dir / "entra.crt", self.dir / "entra.key")
        self._lock = threading.Lock()
        self._keys: dict[str, rsa.RSAPrivateKey] = {}
        self.rotate_key()
        self.direct = _TlsServer(self.tls, _handler(self))
        threading.Thread(target=self.direct.serve_forever, name="entra-id-stand-in", daemon=True).start()
        self.proxy = loopback.serve(_proxy_handler(self), "entra-id-proxy")

    @property
    def proxy_url(self) -> str:
        return f"http://{LOOPBACK}:{self.proxy.server_address[1]}"

    @property
    def direct_url(self) -> str:
        return f"https://{LOOPBACK}:{self.direct.server_address[1]}"

    @property
    def discovery_url(self) -> str:
        return f"{self.direct_url}/{TENANT}/.well-known/openid-configuration"

    def rotate_key(self) -> None:
        """A new signing key, the only one published from now on: tokens signed with the old one are refused
        once the API server fetches the keys again (on a token with the new key's kid)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with self._lock:
            self._keys = {_b64url(secrets.token_bytes(12)): key}

    def keys(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [jwk(key.public_key(), kid) for kid, key in self._keys.items()]}

    def public_keys(self) -> dict[str, rsa.RSAPublicKey]:
        with self._lock:
            return {kid: key.public_key() for kid, key in self._keys.items()}

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": ISSUER,
            "token_endpoint": f"https://{AUTHORITY}/{TENANT}/oauth2/token",
            "jwks_uri": f"{self.direct_url}/common/discovery/keys",
            "response_types_supported": ["code", "id_token", "token id_token"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def issue(self, identity: Identity) -> str:
        """An access token for the AKS server application, as Entra ID gives the identity (the token endpoint
        answers these; a test may make its own)."""
        now = int(datetime.datetime.now(datetime.UTC).timestamp())
        claims = {
            "aud": AKS_SERVER_APP,
            "iss": ISSUER,
            "iat": now,
            "nbf": now,
            "exp": now + int(self.lifetime.total_seconds()),
            "appid": identity.client_id,
            "appidacr": "2",
            "idp": ISSUER,
            "oid": identity.object_id,
            "sub": identity.object_id,
            "tid": TENANT,
            "uti": _b64url(secrets.token_bytes(16)),
            "ver": "1.0",
        }
        with self._lock:
            kid, key = next(iter(self._keys.items()))
        return sign_jwt(key, kid, claims)

    def token(self, tenant: str, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """The answer to one client-credentials request: (status, JSON body)."""
        try:
            identity = self._check(tenant, form)
        except _Refused as refused:
            with self._lock:
                self.refused.append(refused.description)
            return refused.status, {
                "error": refused.error,
                "error_description": refused.description,
                "error_codes": [int(refused.description.split(":")[0].removeprefix("AADSTS"))],
                "trace_id": str(uuid.uuid4()),
                "correlation_id": str(uuid.uuid4()),
            }
        seconds = int(self.lifetime.total_seconds())
        token = self.issue(identity)
        with self._lock:
            self.issued.append(unverified_claims(token))
            self.handed_out.append(token)
        return 200, {"token_type": "Bearer", "expires_in": seconds, "ext_expires_in": seconds, "access_token": token}

    def _check(self, tenant: str, form: Mapping[str, str]) -> Identity:
        if tenant != TENANT:
            raise _Refused(400, "invalid_request", f"AADSTS90002: Tenant '{tenant}' not found.")
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != ASSERTION_TYPE:
            raise _Refused(400, "invalid_request", "AADSTS900144: a client-credentials request with a JWT assertion")
        if form.get("scope", "").split() != [f"{AKS_SERVER_APP}/.default"]:
            raise _Refused(400, "invalid_resource", "AADSTS500011: The resource principal was not found.")
        identity = self.identities.get(form.get("client_id", ""))
        if identity is None:
            raise _Refused(400, "unauthorized_client", "AADSTS700016: Application not found in the directory.")
        claims = self.check_assertion(form.get("client_assertion", ""))
        if claims is None:
            raise _Refused(400, "invalid_client", "AADSTS700024: Client assertion is not valid.")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else list(audiences or [])
        if not any(
            (claims.get("iss"), claims.get("sub")) == (fc.issuer, fc.subject) and fc.audience in audiences
            for fc in identity.federated
        ):
            raise _Refused(
                400,
                "invalid_request",
                "AADSTS70021: No matching federated identity record found for presented assertion.",
            )
        return identity

    def authentication_config(self, path: Path) -> Path:
        """An AuthenticationConfiguration for a provider API server that takes these tokens, as AKS with
        Microsoft Entra ID does: the identity's object ID as the user name."""
        config = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AuthenticationConfiguration",
            "jwt": [
                {
                    "issuer": {
                        "url": ISSUER,
                        "discoveryURL": self.discovery_url,
                        "certificateAuthority": self.ca_file.read_text(),
                        "audiences": [AKS_SERVER_APP],
                    },
                    "claimMappings": {"username": {"claim": "oid", "prefix": ""}},
                }
            ],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def stop(self) -> None:
        for server in (self.proxy, self.direct):
            server.shutdown()
            server.server_close()


class _Refused(Exception):
    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


def _handler(entra: EntraId) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if path == f"/{TENANT}/.well-known/openid-configuration":
                self._answer(200, entra.discovery())
            elif path == "/common/discovery/keys":
                self._answer(200, entra.keys())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
            length = int(self.headers.get("Content-Length") or 0)
            if len(parts) != 4 or parts[1:] != ["oauth2", "v2.0", "token"] or not 0 < length <= MAX_BODY:
                self._answer(404, {"error": "not_found"})
                return
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            self._answer(*entra.token(parts[0], form))

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _proxy_handler(entra: EntraId) -> type[BaseHTTPRequestHandler]:
    served = _handler(entra)
    return loopback.connect_proxy(
        lambda host, port: (host, port) == (AUTHORITY, "443"),
        "the Entra ID stand-in tunnels to login.microsoftonline.com only",
        lambda: entra.tls,
        # HTTP on the tunnel, as long as the client keeps it.
        lambda conn, _: served(conn, conn.getpeername(), entra.proxy),
    )


def workload_identity_token(
    consumer: Kube, namespace: str, service_account: str, path: Path, seconds: int = 3600
) -> Path:
    """A token of the ServiceAccount for Workload ID's audience, written where AKS projects it into a Pod."""
    request: Any = {"spec": {"audiences": [EXCHANGE_AUDIENCE], "expirationSeconds": seconds}}
    issued: Any = k8s.CoreV1Api(consumer.api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    path.write_text(str(issued.status.token))
    path.chmod(0o600)
    return path


def sdk_environment(entra: EntraId, client_id: str, token_file: Path) -> dict[str, str]:
    """The variables AKS's workload identity webhook sets in a Pod labelled azure.workload.identity/use=true,
    and the way to the stand-in: Entra ID's host through its proxy (loopback not), its CA trusted."""
    return {
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": client_id,
        "AZURE_FEDERATED_TOKEN_FILE": str(token_file),
        "AZURE_AUTHORITY_HOST": f"https://{AUTHORITY}/",
        "HTTPS_PROXY": entra.proxy_url,
        "NO_PROXY": f"{LOOPBACK},localhost",
        "REQUESTS_CA_BUNDLE": str(entra.ca_file),
    }
