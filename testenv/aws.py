"""What an EKS provider's authentication meets in AWS, for a LiqoPeering that reaches it with the operator's
own workload identity (spec.remoteCluster, provider aws).

Real: the verifier, aws-iam-authenticator's server (built from its Go module, AWS_IAM_AUTHENTICATOR_VERSION),
as the provider API server's webhook token authenticator, with its own token checks and role mapping; and,
on the operator's side, AWS's SDK (awscrt) finding credentials and presigning.

Stood in, on loopback only:
- **STS** (``Sts``): aws-iam-authenticator GETs the token's presigned GetCallerIdentity URL at
  ``sts.<region>.amazonaws.com``; its process is given ``HTTPS_PROXY`` pointing here, and trusts this CA
  (``SSL_CERT_FILE``). The proxy takes CONNECT for STS host names only, terminates TLS as that host, checks
  the request's SigV4 query signature with the secret of the access key it names (issued by the agent
  below), its session token and its age (15 minutes, as STS does), and answers the caller's assumed-role
  ARN. What it cannot show: STS's other checks (IAM policies, a role's trust policy, SCPs).
- **STS's AssumeRoleWithWebIdentity, for IRSA** (``WebIdentitySts``): AWS's SDK posts the role and the
  ServiceAccount token that EKS projects into the Pod to ``https://sts.<region>.amazonaws.com`` on port 443,
  with no way to point it elsewhere. So the operator's process is given a view of the world of its own
  (``world_of``): a mount namespace where ``/etc/hosts`` names a loopback address of this stand-in for that
  host, and the system's CA bundle trusts its CA too. The stand-in checks the token with a TokenReview for
  the audience ``sts.amazonaws.com`` and the subject against the role's trust (``system:serviceaccount:
  <namespace>:<name>``), as a trust policy's ``:sub`` condition does, and issues keys that the proxy above
  then knows. What it cannot show: OIDC discovery of the cluster's issuer, IAM policies.
- **The EKS Pod Identity agent** (``PodIdentityAgent``): the SDK asks it for credentials with the
  ServiceAccount token that EKS projects into the Pod (audience ``pods.eks.amazonaws.com``); it checks that
  token with a TokenReview on the consumer, as EKS Auth does, and issues temporary keys for the role associated
  with that ServiceAccount. What it cannot show: EKS's association API and its own expiry policy.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import json
import re
import secrets
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import yaml
from kubernetes import client as k8s

from testenv import loopback
from testenv.kube import Kube, Res
from testenv.localk8s import pki
from testenv.localk8s.ports import free_port
from testenv.loopback import LOOPBACK
from testenv.spawned import Spawned
from testenv.wait import wait_for

ACCOUNT = "111122223333"
REGION = "us-east-1"
# Pod Identity's audience for the projected ServiceAccount token, and the header aws-iam-authenticator binds
# a token to its cluster with.
POD_IDENTITY_AUDIENCE = "pods.eks.amazonaws.com"
# IRSA's audience: what the EKS webhook projects the token for, and what STS takes for AssumeRoleWithWebIdentity.
WEB_IDENTITY_AUDIENCE = "sts.amazonaws.com"
# Where the operator's process takes its host names and its trusted CAs from (Debian's, and the image's).
HOSTS_FILE = Path("/etc/hosts")
SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
MAX_FORM_BYTES = 64 * 1024
CLUSTER_ID_HEADER = "x-k8s-aws-id"
STS_HOST = re.compile(r"^sts(\.[a-z0-9-]+)?\.amazonaws\.com$")
# STS accepts a presigned GetCallerIdentity for 15 minutes after its X-Amz-Date, whatever X-Amz-Expires says.
PRESIGNED_VALIDITY = datetime.timedelta(minutes=15)
TOKEN_REVIEW = Res("authentication.k8s.io", "v1", "tokenreviews")


@dataclass(frozen=True)
class Issued:
    """Temporary credentials, and whom STS says they are."""

    access_key_id: str
    secret_access_key: str
    session_token: str
    role_arn: str  # arn:aws:iam::<account>:role/<role>
    session: str

    @property
    def assumed_role_arn(self) -> str:
        role = self.role_arn.rsplit("/", 1)[1]
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{self.session}"


@dataclass
class Sts:
    """The STS stand-in: an HTTPS proxy on loopback that answers GetCallerIdentity for the keys it knows."""

    dir: Path
    issued: dict[str, Issued] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)  # the ARNs it vouched for, in order
    refused: list[str] = field(default_factory=list)  # why it refused, in order

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = pki.new_ca("sts stand-in")
        self.ca_file = self.dir / "sts-ca.crt"
        self.ca_file.write_bytes(pki.cert_pem(self.ca.cert))
        hosts = ["sts.amazonaws.com", f"sts.{REGION}.amazonaws.com"]
        leaf = pki.new_serving_cert(self.ca, hosts[1], hosts, [])
        (self.dir / "sts.crt").write_bytes(pki.cert_pem(leaf.cert))
        (self.dir / "sts.key").write_bytes(pki.key_pem(leaf.key))
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(self.dir / "sts.crt", self.dir / "sts.key")
        self._lock = threading.Lock()
        self.server = loopback.serve(_proxy_handler(self), "sts-stand-in")
        self.port = self.server.server_address[1]

    @property
    def proxy_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def issue(self, role_arn: str, session: str) -> Issued:
        creds = Issued(
            "ASIA" + secrets.token_hex(8).upper(),
            secrets.token_urlsafe(30),
            secrets.token_urlsafe(60),
            role_arn,
            session,
        )
        with self._lock:
            self.issued[creds.access_key_id] = creds
        return creds

    def revoke(self, access_key_id: str) -> None:
        with self._lock:
            self.issued.pop(access_key_id, None)

    def stop(self) -> None:
        loopback.stop(self.server)

    def caller_identity(self, host: str, target: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The answer to one GetCallerIdentity: (status, JSON body)."""
        parsed = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        one = {k: v[0] for k, v in query.items() if len(v) == 1}
        try:
            creds = self._check(host, parsed.path, parsed.query, one, headers)
        except ValueError as exc:
            with self._lock:
                self.refused.append(str(exc))
            return 403, {"Error": {"Type": "Sender", "Code": "SignatureDoesNotMatch", "Message": str(exc)}}
        with self._lock:
            self.answered.append(creds.assumed_role_arn)
        result = {
            "Arn": creds.assumed_role_arn,
            "UserId": f"AROA{hashlib.sha256(creds.role_arn.encode()).hexdigest()[:16].upper()}:{creds.session}",
            "Account": ACCOUNT,
        }
        return 200, {
            "GetCallerIdentityResponse": {
                "GetCallerIdentityResult": result,
                "ResponseMetadata": {"RequestId": secrets.token_hex(16)},
            }
        }

    def _check(self, host: str, path: str, raw_query: str, q: dict[str, str], headers: dict[str, str]) -> Issued:
        if q.get("Action") != "GetCallerIdentity" or q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            raise ValueError("not a SigV4-signed GetCallerIdentity")
        key_id, date, region, service, terminal = (q.get("X-Amz-Credential", "") + "////").split("/")[:5]
        with self._lock:
            creds = self.issued.get(key_id)
        if creds is None:
            raise ValueError(f"unknown or revoked access key {key_id!r}")
        if q.get("X-Amz-Security-Token") != creds.session_token:
            raise ValueError("wrong session token")
        stamp = q.get("X-Amz-Date", "")
        signed_at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        now = datetime.datetime.now(datetime.UTC)
        if not signed_at - datetime.timedelta(minutes=5) <= now <= signed_at + PRESIGNED_VALIDITY:
            raise ValueError("the presigned request has expired")
        if (service, terminal) != ("sts", "aws4_request") or date != stamp[:8]:
            raise ValueError("wrong credential scope")
        signed_headers = q.get("X-Amz-SignedHeaders", "").split(";")
        lowered = {k.lower(): v.strip() for k, v in headers.items()} | {"host": host}
        if CLUSTER_ID_HEADER not in signed_headers or any(h not in lowered for h in signed_headers):
            raise ValueError(f"the {CLUSTER_ID_HEADER} header is not signed, or a signed header is missing")
        pairs = [(k, v) for k, v in urllib.parse.parse_qsl(raw_query, keep_blank_values=True) if k != "X-Amz-Signature"]
        canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted((k, v) for k, v in pairs))
        canonical = "\n".join(
            [
                "GET",
                path or "/",
                canonical_query,
                "".join(f"{h}:{lowered[h]}\n" for h in signed_headers),
                ";".join(signed_headers),
                hashlib.sha256(b"").hexdigest(),
            ]
        )
        scope = f"{date}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + creds.secret_access_key).encode()
        for part in (date, region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, q.get("X-Amz-Signature", "")):
            raise ValueError("the signature does not match")
        return creds


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="-_.~")


def _proxy_handler(sts: Sts) -> type[BaseHTTPRequestHandler]:
    return loopback.connect_proxy(
        lambda host, port: bool(STS_HOST.match(host)) and port == "443",
        "the STS stand-in tunnels to STS only",
        lambda: sts.tls,
        lambda conn, host: _serve_sts(sts, conn, host),
    )


def _serve_sts(sts: Sts, conn: ssl.SSLSocket, host: str) -> None:
    """One HTTP/1.1 exchange on the tunnel (aws-iam-authenticator makes one request per token)."""
    reader = conn.makefile("rb")
    request_line = reader.readline(8192).decode("latin-1").strip()
    headers: dict[str, str] = {}
    while True:
        line = reader.readline(8192).decode("latin-1")
        if line in ("\r\n", "\n", ""):
            break
        name, _, value = line.partition(":")
        headers[name.strip()] = value.strip()
    method, target, _ = [*request_line.split(" "), "", "", ""][:3]
    if method != "GET":
        status, body = 405, {"Error": {"Code": "MethodNotAllowed"}}
    else:
        status, body = sts.caller_identity(host, target, headers)
    data = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    conn.sendall(head.encode() + data)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


@dataclass
class PodIdentityAgent:
    """The EKS Pod Identity agent stand-in: credentials for a ServiceAccount's projected token, once the
    consumer's API server says that token is that ServiceAccount's (TokenReview)."""

    sts: Sts
    consumer: Kube  # an identity that may create TokenReviews
    associations: dict[str, str]  # "namespace/serviceaccount" -> role ARN
    lifetime: datetime.timedelta = datetime.timedelta(hours=1)
    handed_out: list[Issued] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server = loopback.serve(_agent_handler(self), "pod-identity-agent")
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1/credentials"

    def credentials(self, token: str) -> tuple[int, dict[str, Any]]:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [POD_IDENTITY_AUDIENCE]},
        }
        status = self.consumer.create(TOKEN_REVIEW, review).get("status") or {}
        user = (status.get("user") or {}).get("username", "")
        if not status.get("authenticated") or POD_IDENTITY_AUDIENCE not in (status.get("audiences") or []):
            return 403, {"Message": f"the token is not valid for {POD_IDENTITY_AUDIENCE}"}
        account = user.removeprefix("system:serviceaccount:").replace(":", "/", 1)
        role = self.associations.get(account)
        if role is None:
            return 403, {"Message": f"no Pod Identity association for {account}"}
        creds = self.sts.issue(role, f"eks-{account.replace('/', '-')}"[:64])
        self.handed_out.append(creds)
        expires = datetime.datetime.now(datetime.UTC) + self.lifetime
        return 200, {
            "AccessKeyId": creds.access_key_id,
            "SecretAccessKey": creds.secret_access_key,
            "Token": creds.session_token,
            "AccountId": ACCOUNT,
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def stop(self) -> None:
        loopback.stop(self.server)


def _agent_handler(agent: PodIdentityAgent) -> type[BaseHTTPRequestHandler]:
    class Agent(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            token = self.headers.get("Authorization", "")
            status, body = (
                agent.credentials(token) if self.path == "/v1/credentials" and token else (401, {"Message": "no token"})
            )
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Agent


@dataclass
class WebIdentitySts:
    """STS's AssumeRoleWithWebIdentity on ``address``:443 over TLS as ``sts.<region>.amazonaws.com``: keys for a
    role whose trust names the token's ServiceAccount, once the consumer's API server says the token is that
    ServiceAccount's for STS's audience."""

    sts: Sts
    consumer: Kube  # an identity that may create TokenReviews
    trust: dict[str, str]  # role ARN -> the subject it trusts, system:serviceaccount:<namespace>:<name>
    lifetime: datetime.timedelta = datetime.timedelta(hours=1)
    handed_out: list[Issued] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server, self.address = _serve_on_a_loopback_address(_web_identity_handler(self), self.sts.tls)

    def assume(self, form: dict[str, str]) -> tuple[int, str]:
        """The answer to one POST: (status, XML body)."""
        role, token = form.get("RoleArn", ""), form.get("WebIdentityToken", "")
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [WEB_IDENTITY_AUDIENCE]},
        }
        if form.get("Action") != "AssumeRoleWithWebIdentity" or not role or not token:
            return self._refuse(400, "InvalidAction", "not an AssumeRoleWithWebIdentity with a role and a token")
        status = self.consumer.create(TOKEN_REVIEW, review).get("status") or {}
        subject = (status.get("user") or {}).get("username", "")
        if not status.get("authenticated") or WEB_IDENTITY_AUDIENCE not in (status.get("audiences") or []):
            return self._refuse(400, "InvalidIdentityToken", f"the token is not valid for {WEB_IDENTITY_AUDIENCE}")
        if self.trust.get(role) != subject:
            return self._refuse(403, "AccessDenied", f"{role} does not trust {subject}")
        creds = self.sts.issue(role, form.get("RoleSessionName", "")[:64] or "session")
        self.handed_out.append(creds)
        expires = (datetime.datetime.now(datetime.UTC) + self.lifetime).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 200, (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult>"
            f"<Credentials><AccessKeyId>{creds.access_key_id}</AccessKeyId>"
            f"<SecretAccessKey>{creds.secret_access_key}</SecretAccessKey>"
            f"<SessionToken>{creds.session_token}</SessionToken><Expiration>{expires}</Expiration></Credentials>"
            f"<SubjectFromWebIdentityToken>{escape(subject)}</SubjectFromWebIdentityToken>"
            f"<AssumedRoleUser><Arn>{creds.assumed_role_arn}</Arn></AssumedRoleUser>"
            f"<Audience>{WEB_IDENTITY_AUDIENCE}</Audience>"
            "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
        )

    def _refuse(self, status: int, code: str, message: str) -> tuple[int, str]:
        self.refused.append(f"{code}: {message}")
        return status, (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{escape(message)}</Message></Error>"
            "</ErrorResponse>"
        )

    def world_of(self, dir: Path) -> list[str]:
        """The command prefix that runs a process in a mount namespace of its own, where ``sts.<region>.amazonaws.com``
        is this stand-in and its CA is trusted: what it sees instead of EKS's DNS and public CAs."""
        if not SYSTEM_CA_BUNDLE.is_file():
            raise AssertionError(f"{SYSTEM_CA_BUNDLE} is missing: the system's CA bundle is a prerequisite")
        dir.mkdir(parents=True, exist_ok=True)
        hosts, bundle = dir / "hosts", dir / "ca-certificates.crt"
        names = " ".join(["sts.amazonaws.com", f"sts.{REGION}.amazonaws.com"])
        hosts.write_text(f"{HOSTS_FILE.read_text()}\n{self.address} {names}\n")
        bundle.write_bytes(SYSTEM_CA_BUNDLE.read_bytes() + self.sts.ca_file.read_bytes())
        script = f'mount --bind {hosts} {HOSTS_FILE} && mount --bind {bundle} {SYSTEM_CA_BUNDLE} && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def stop(self) -> None:
        loopback.stop(self.server)


def _serve_on_a_loopback_address(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext) -> tuple[Any, str]:
    """A server on port 443 (the SDK's, fixed) of a loopback address no other server of the suite has taken."""
    for _ in range(20):
        address = f"127.{secrets.randbelow(200) + 50}.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 1}"
        with contextlib.suppress(OSError):
            return loopback.serve(handler, "sts-web-identity", tls, (address, 443)), address
    raise AssertionError("no loopback address with port 443 free for the STS stand-in")


def _web_identity_handler(sts: WebIdentitySts) -> type[BaseHTTPRequestHandler]:
    class WebIdentity(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/" or not 0 < length <= MAX_FORM_BYTES:
                status, body = sts._refuse(400, "InvalidRequest", "a form of at most 64 KiB is posted to /")
            else:
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode(), keep_blank_values=True))
                status, body = sts.assume(form)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return WebIdentity


@dataclass
class IamAuthenticator:
    """aws-iam-authenticator's server for one EKS cluster: ``webhook_kubeconfig`` is the file the provider's
    kube-apiserver takes with --authentication-token-webhook-config-file."""

    binary: Path
    dir: Path
    cluster: str  # the EKS cluster name tokens are bound to
    sts: Sts
    map_roles: list[dict[str, Any]]  # rolearn, username, groups
    proc: Spawned | None = None

    @property
    def webhook_kubeconfig(self) -> Path:
        return self.dir / "webhook.kubeconfig"

    def start(self) -> None:
        (self.dir / "state").mkdir(parents=True, exist_ok=True)  # it writes its key there, and creates no directory
        port = free_port()
        config = {
            "clusterID": self.cluster,
            "server": {
                "port": port,
                "address": LOOPBACK,
                "stateDir": str(self.dir / "state"),
                "generateKubeconfig": str(self.webhook_kubeconfig),
                "backendMode": ["MountedFile"],
                "mapRoles": self.map_roles,
            },
        }
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config))
        environ = {
            "PATH": "/usr/bin:/bin",
            "HTTPS_PROXY": self.sts.proxy_url,
            "SSL_CERT_FILE": str(self.sts.ca_file),
            "AWS_EC2_METADATA_DISABLED": "true",  # no instance metadata here: never asked
            "AWS_REGION": REGION,
        }
        self.proc = Spawned(
            "aws-iam-authenticator",
            [str(self.binary), "server", "--config", str(self.dir / "config.yaml")],
            self.dir / "aws-iam-authenticator.log",
            environ,
        )

        def serving() -> bool:
            assert self.proc is not None
            if not self.proc.alive():
                raise AssertionError(f"aws-iam-authenticator exited: {self.proc.tail()}")
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=1):
                return self.webhook_kubeconfig.is_file()
            return False

        wait_for("aws-iam-authenticator to serve and write its webhook kubeconfig", serving, timeout=60)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def pod_identity_token(
    consumer: Kube,
    namespace: str,
    service_account: str,
    path: Path,
    seconds: int = 3600,
    audience: str = POD_IDENTITY_AUDIENCE,
) -> Path:
    """A token of the ServiceAccount for Pod Identity's audience (or IRSA's), written where EKS projects it."""
    request: Any = {"spec": {"audiences": [audience], "expirationSeconds": seconds}}
    issued: Any = k8s.CoreV1Api(consumer.api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    path.write_text(str(issued.status.token))
    path.chmod(0o600)
    return path


def sdk_environment(agent: PodIdentityAgent, token_file: Path) -> dict[str, str]:
    """The variables EKS sets in a Pod with a Pod Identity association, the agent's address moved here."""
    return {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": agent.url,
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance metadata here: never asked
        "AWS_REGION": REGION,
    }


def irsa_environment(role_arn: str, token_file: Path) -> dict[str, str]:
    """The variables EKS's Pod Identity webhook sets in a Pod whose ServiceAccount carries an IRSA role."""
    return {
        "AWS_ROLE_ARN": role_arn,
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
        "AWS_STS_REGIONAL_ENDPOINTS": "regional",
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance metadata here: never asked
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }
