"""A validating admission webhook on loopback that denies what it is sent, as a policy engine does.

    with DenyingWebhook(tmp_path, code=403, message="[tenants-need-approval] ...") as hook:
        register it: hook.configuration(name, rules)  (a ValidatingWebhookConfiguration with its caBundle)

It serves HTTPS on 127.0.0.1 with a self-signed certificate for that address, which the configuration's
caBundle carries. The harness's API servers run on the host (localk8s, without egress), so they dial a
webhook's `url` on loopback directly. Each AdmissionReview it answers is counted (`reviews`).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = "127.0.0.1"


def self_signed(directory: Path) -> tuple[Path, Path, bytes]:
    """A key and a certificate for 127.0.0.1 signed by that key: (cert file, key file, cert PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test admission webhook")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = directory / "webhook.crt", directory / "webhook.key"
    cert_file.write_bytes(pem)
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return cert_file, key_file, pem


class DenyingWebhook:
    """Denies every AdmissionReview with the Status a policy engine sends: OPA Gatekeeper answers code 403,
    reason Forbidden; code 0 (none) makes the API server answer 400."""

    def __init__(self, directory: Path, *, code: int, message: str, reason: str = "Forbidden") -> None:
        self.result = {"code": code, "reason": reason, "message": message} if code else {"message": message}
        cert_file, key_file, self.ca_pem = self_signed(directory)
        self.reviews = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                hook.reviews += 1
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": False, "status": hook.result},
                }
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://{LOOPBACK}:{self.server.server_port}/validate"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> DenyingWebhook:
        self._thread.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()

    def configuration(self, name: str, rules: list[dict[str, Any]], **selectors: Any) -> dict[str, Any]:
        """A ValidatingWebhookConfiguration sending the requests ``rules`` match here (failurePolicy Fail);
        ``selectors``: namespaceSelector, objectSelector."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": f"{name}.policy.example.com",
                    "clientConfig": {"url": self.url, "caBundle": base64.b64encode(self.ca_pem).decode()},
                    "rules": rules,
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 5,
                    **selectors,
                }
            ],
        }
