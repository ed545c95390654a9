"""A scan of a whole e2e run for credentials in the operator's output (docs/reliability.md: "no leaks").

Every Secret on the test clusters is read while the run goes on (each test's teardown, before its objects
are removed), so that credentials that existed only for a while (rotated kubeconfigs, Liqo's identity
kubeconfigs, nonces) are known too. Each credential becomes a set of needles: the value as stored
(base64), the decoded value, and for PEM blocks every body line. At the end, every operator log line,
every Event on the clusters and every LiqoPeering and LiqoPeeringSet status seen is searched for every needle.

Public material is not a credential: CA certificates (`ca.crt`, `certificate-authority-data`) and API
server endpoints (`address`) are left out, as are Helm's release records and values shorter than MIN_LENGTH
(flags such as "true").
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client as k8s

from testenv import inventory

MIN_LENGTH = 16
# CA certificates, and a managed cluster's endpoint (the Secret of spec.remoteCluster.secretRef), which the
# status and logs name as they name any provider's server.
PUBLIC_KEYS = frozenset({"ca.crt", "certificate-authority-data", "address"})
# Fields of a kubeconfig's user that are secret.
USER_SECRETS = ("client-key-data", "client-certificate-data", "token", "password")
NOT_CREDENTIALS = frozenset({"helm.sh/release.v1"})


@dataclass(frozen=True)
class Finding:
    credential: str  # where the credential lives: "consumer Secret ns/name key"
    where: str  # where it was found: "operator.log line 12", "Event ns/name", "status of ns/name"


def _decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _pem_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("-----")]


def needles_of_value(value: str) -> set[str]:
    """What would show if this (decoded) secret value were printed, whole or in part."""
    found = {value} if len(value) >= MIN_LENGTH else set()
    if "-----BEGIN" in value:
        found.update(line for line in _pem_lines(value) if len(line) >= MIN_LENGTH)
        return found
    try:
        doc = yaml.safe_load(value)
    except (yaml.YAMLError, RecursionError):  # hostile kubeconfigs (tests/e2e/test_tenant.py) nest deep
        return found
    if isinstance(doc, dict) and isinstance(doc.get("users"), list):
        found.discard(value)  # the kubeconfig as a whole: its server and CA are not secret
        for entry in doc["users"]:
            user = entry.get("user") if isinstance(entry, dict) else None
            if not isinstance(user, dict):
                continue
            for key in USER_SECRETS:
                item = user.get(key)
                if not isinstance(item, str) or len(item) < MIN_LENGTH:
                    continue
                found.add(item)
                decoded = _decode(item) if key.endswith("-data") else None
                if decoded is not None and (text := _text(decoded)) is not None:
                    found |= needles_of_value(text)
    return found


def needles_of_secret(secret: dict[str, Any], side: str) -> dict[str, str]:
    """needle -> the credential's name, for one Secret (as the API returns it: data in base64)."""
    meta = secret.get("metadata") or {}
    if secret.get("type") in NOT_CREDENTIALS:
        return {}
    out: dict[str, str] = {}
    for key, stored in (secret.get("data") or {}).items():
        if key in PUBLIC_KEYS or not isinstance(stored, str):
            continue
        label = f"{side} Secret {meta.get('namespace')}/{meta.get('name')} key {key}"
        raw = _decode(stored)
        text = _text(raw) if raw is not None else None
        needles = {stored} if len(stored) >= MIN_LENGTH else set()
        if text is not None:
            needles |= needles_of_value(text)
        out.update(dict.fromkeys(needles, label))
    return out


def search(needles: dict[str, str], haystacks: dict[str, str]) -> list[Finding]:
    """Every (credential, place) pair where a needle occurs."""
    found = set()
    for where, text in haystacks.items():
        for needle, credential in needles.items():
            if needle in text:
                found.add(Finding(credential, where))
    return sorted(found, key=lambda f: (f.where, f.credential))


@dataclass
class LeakScan:
    """Collects needles and haystacks during a run; `findings()` at the end."""

    needles: dict[str, str] = field(default_factory=dict)
    haystacks: dict[str, str] = field(default_factory=dict)
    log_files: set[Path] = field(default_factory=set)
    secrets_seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def collect(self, apis: dict[str, k8s.ApiClient]) -> None:
        """Read every Secret, Event and LiqoPeering status on these clusters (side -> client)."""
        for side, api in apis.items():
            core = k8s.CoreV1Api(api)
            secrets = inventory.listed(core.list_secret_for_all_namespaces)
            events = inventory.listed(core.list_event_for_all_namespaces)
            with self._lock:
                for secret in secrets:
                    meta = secret.get("metadata") or {}
                    self.secrets_seen.add(f"{side}/{meta.get('namespace')}/{meta.get('name')}/{meta.get('uid')}")
                    self.needles.update(needles_of_secret(secret, side))
                for event in events:
                    meta = event.get("metadata") or {}
                    text = " ".join(str(event.get(k) or "") for k in ("reason", "message", "note"))
                    self.haystacks[f"{side} Event {meta.get('namespace')}/{meta.get('name')}"] = text
            for kind, plural in (("LiqoPeering", "liqopeerings"), ("LiqoPeeringSet", "liqopeeringsets")):
                try:
                    found = cast(
                        dict[str, Any],
                        k8s.CustomObjectsApi(api).list_cluster_custom_object(
                            "peering.liqo-operator.io", "v1alpha1", plural
                        ),
                    )
                except k8s.ApiException:
                    continue  # no CRD on this cluster
                with self._lock:
                    for item in found.get("items") or []:
                        meta = item.get("metadata") or {}
                        key = f"{side} status of {kind} {meta.get('namespace')}/{meta.get('name')} ({meta.get('uid')})"
                        self.haystacks[key] = json.dumps(item.get("status") or {})

    def add_log(self, path: Path) -> None:
        with self._lock:
            self.log_files.add(path)

    def add_text(self, where: str, text: str) -> None:
        with self._lock:
            self.haystacks[where] = text

    def all_haystacks(self) -> dict[str, str]:
        out = dict(self.haystacks)
        for path in sorted(self.log_files):
            if path.is_file():
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    out[f"{path} line {number}"] = line
        return out

    def findings(self) -> list[Finding]:
        return search(self.needles, self.all_haystacks())
