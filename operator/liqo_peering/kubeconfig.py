"""Parse and vet the PROVIDER cluster's kubeconfig stored in a Secret.

Convention (Flux, Cluster API): a remote kubeconfig must be self-contained. Server, CA data,
client certificate/key data, a bearer token or basic auth are accepted. The following are refused:

* ``exec`` credential plugins and ``auth-provider`` plugins: they run programs inside the operator
  pod. Refused unless the operator runs with ``--insecure-kubeconfig-exec``.
* ``insecure-skip-tls-verify: true`` and plain ``http://`` servers: no server authentication.
  Refused unless the operator runs with ``--insecure-kubeconfig-tls``.
* Any file reference (``certificate-authority``, ``client-certificate``, ``client-key``,
  ``tokenFile``/``token-file``): files in the operator pod are not the Secret author's to point at.
  Always refused; there is no flag. (A program named by ``exec.command`` or an auth-provider
  ``cmd-path`` counts as an exec plugin, not as a file reference.)

It is read within bounds before anything in it is used (MAX_BYTES, MAX_DEPTH, MAX_NODES, and no YAML anchors
or aliases), each refusal a ``KubeconfigInvalid`` naming the bound.

Only the selected context (and the cluster and user it names) is vetted and kept; every other entry is
dropped, so nothing outside the narrowed config can ever be used.

Every error message names fields and entry names only, never values: tokens, passwords, keys and
certificate data never appear in ``KubeconfigError.message``. Text from elsewhere (API errors) is scrubbed
by liqo_peering.redact before it goes to status, events or logs.

This module performs no cluster I/O and never imports the Kubernetes client (clients/connect.py
builds the client from a vetted kubeconfig).
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from liqo_peering.errors import PeeringError

EXEC_FLAG = "--insecure-kubeconfig-exec"
TLS_FLAG = "--insecure-kubeconfig-tls"

# Fields that make the Kubernetes client read a file from the operator's filesystem.
_CLUSTER_FILE_FIELDS = ("certificate-authority",)
_USER_FILE_FIELDS = ("client-certificate", "client-key", "tokenFile", "token-file")
_EXEC_FIELDS = ("exec", "auth-provider")

# Bounds on what a kubeconfig Secret may hold, checked while parsing (before any Python object is built).
# A Secret holds at most 1 MiB; a kubeconfig narrowed to one provider is a few KiB, nests about 5 levels deep
# and has a few dozen nodes. Anchors and aliases are refused outright: a kubeconfig never needs them, and
# expanding them is how a small document becomes a huge one (client-go bounds them since CVE-2019-11253).
MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 20_000


class KubeconfigError(PeeringError):
    """Base class: ``reason`` is a CamelCase condition reason, ``message`` is safe to publish.

    Never transient: only a new Secret (which wakes the peering) or a new flag can fix it.
    """

    reason: str = "KubeconfigError"
    transient = False

    def __init__(self, message: str) -> None:
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class KubeconfigInvalid(KubeconfigError):
    """The kubeconfig cannot be used: not YAML, wrong shape, missing entries or server."""

    reason = "KubeconfigInvalid"


class KubeconfigUnsafe(KubeconfigError):
    """The kubeconfig is well-formed but uses a feature this operator refuses."""

    reason = "KubeconfigUnsafe"


@dataclass(frozen=True)
class CloudIdentity:
    """A managed provider cluster that the operator reaches with its own cloud identity (spec.remoteCluster):
    the request's bearer token is made for it by the cloud's SDK (clients/cloud.py), not read from a user."""

    provider: str  # spec.remoteCluster.provider: aws
    cluster_name: str
    location: str  # AWS region (GCP location, Azure resource group)


@dataclass(frozen=True)
class RemoteKubeconfig:
    """A vetted kubeconfig narrowed to one context.

    ``config`` holds credentials, so it is excluded from ``repr`` (and therefore from logs that
    print the object).
    """

    config: dict[str, Any] = field(repr=False)
    server: str
    context_name: str
    # The access provider of a ClusterProfile (clusterprofile.py) whose plugin gives the credential: the
    # operator runs it itself, within bounds (clients/execplugin.py), not the Kubernetes client.
    access_provider: str | None = None
    # A managed cluster reached with the operator's own cloud identity (spec.remoteCluster): its SDK makes
    # the token (clients/cloud.py).
    cloud: CloudIdentity | None = None


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------


# libyaml when PyYAML was built with it (its wheels are): it parses a 1 MiB document in tens of milliseconds.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Refused(Exception):
    """A bound was hit; the message names the bound, never a value."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _check_events(text: str) -> None:
    """Refuse anchors and aliases and bound depth and node count on the parser's events, before any node or
    Python object is built: an alias is refused before anything could expand it."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise _Refused(
                f"the kubeconfig uses YAML anchors or aliases (line {line}), which a kubeconfig never needs; "
                "store a plain kubeconfig file (e.g. kubectl config view --minify --flatten --raw)"
            )
        nodes += 1
        if nodes > MAX_NODES:
            raise _Refused(f"the kubeconfig has more than {MAX_NODES} YAML nodes; keep only the entries it needs")
        level = depth + 1
        if isinstance(event, yaml.CollectionStartEvent):
            depth = level
        if level > MAX_DEPTH:
            raise _Refused(f"the kubeconfig nests deeper than {MAX_DEPTH} levels (line {line})")


def _load_bounded(text: str) -> Any:
    _check_events(text)
    return yaml.load(text, Loader=_LOADER)  # a SafeLoader; no alias is left to expand


def parse_yaml(raw: bytes | str) -> Any:
    """The YAML document in ``raw``, within the bounds above, or ``KubeconfigInvalid``."""
    size = len(raw) if isinstance(raw, bytes | bytearray) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise KubeconfigInvalid(
            f"the kubeconfig is larger than {MAX_BYTES} bytes; store a kubeconfig narrowed to the provider "
            "(kubectl config view --minify --flatten --raw)"
        )
    if isinstance(raw, bytes | bytearray):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KubeconfigInvalid(
                f"the kubeconfig is not valid UTF-8 text (byte offset {exc.start}); store the "
                "kubeconfig file itself in the Secret (kubectl create secret generic NAME "
                "--from-file=kubeconfig=PATH)"
            ) from None
    else:
        text = raw
    if not text.strip():
        raise KubeconfigInvalid("the kubeconfig is empty; put a complete kubeconfig in the referenced Secret key")
    try:
        return _load_bounded(text)
    except _Refused as exc:
        raise KubeconfigInvalid(exc.message) from None
    except yaml.YAMLError as exc:
        # str(exc) quotes the offending line, which may hold a token: report the position only.
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None)
        what = f" ({problem})" if isinstance(problem, str) else ""
        raise KubeconfigInvalid(
            f"the kubeconfig is not valid YAML{where}{what}; check the Secret holds an unmodified kubeconfig file"
        ) from None
    except (ValueError, OverflowError):
        # A scalar PyYAML resolves but cannot build: a date such as 2001-02-30, an integer of thousands of
        # digits (Python's int limit). The exception text quotes the value: report neither.
        raise KubeconfigInvalid(
            "the kubeconfig holds an unquoted value that is not a valid date or number; quote it"
        ) from None


def _named_entries(doc: dict[str, Any], key: str, inner: str) -> dict[str, dict[str, Any]]:
    """Return ``{name: inner-mapping}`` for a kubeconfig list such as ``clusters``."""
    items = doc.get(key)
    if not items:
        raise KubeconfigInvalid(
            f"the kubeconfig has no {key}; a usable kubeconfig needs at least one entry in "
            f"'{key}' (export a complete one, e.g. with kubectl config view --minify --flatten --raw)"
        )
    if not isinstance(items, list):
        raise KubeconfigInvalid(f"'{key}' in the kubeconfig must be a list of named entries")
    out: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise KubeconfigInvalid(f"entry #{index} of '{key}' in the kubeconfig has no name")
        body = item.get(inner)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise KubeconfigInvalid(f"'{key}' entry '{item['name']}' in the kubeconfig: '{inner}' must be a mapping")
        if item["name"] in out:
            # client-go refuses duplicates too (clientcmd/api/v1 conversion); never guess which one.
            raise KubeconfigInvalid(f"'{key}' in the kubeconfig has two entries named '{item['name']}'; rename one")
        out[item["name"]] = body
    return out


def _names(entries: dict[str, Any]) -> str:
    return ", ".join(sorted(entries)) or "(none)"


def _select_context(doc: dict[str, Any], contexts: dict[str, dict[str, Any]], requested: str | None) -> str:
    if requested:
        if requested not in contexts:
            raise KubeconfigInvalid(
                f"context '{requested}' not found in the kubeconfig; available contexts: "
                f"{_names(contexts)}; set the LiqoPeering's kubeconfig context to one of them"
            )
        return requested
    current = doc.get("current-context")
    if isinstance(current, str) and current:
        if current not in contexts:
            raise KubeconfigInvalid(
                f"current-context '{current}' not found in the kubeconfig; available contexts: "
                f"{_names(contexts)}; name a context explicitly or fix current-context"
            )
        return current
    if len(contexts) == 1:
        return next(iter(contexts))
    raise KubeconfigInvalid(
        "the kubeconfig has no current-context and several contexts; available contexts: "
        f"{_names(contexts)}; name the context to use explicitly"
    )


def _check_tls_flag(cluster_name: str, cluster: dict[str, Any], *, allow_insecure_tls: bool) -> None:
    if "insecure-skip-tls-verify" not in cluster:
        return
    value = cluster["insecure-skip-tls-verify"]
    if not isinstance(value, bool):
        # The Python client evaluates `not value`, so the string "false" would DISABLE verification.
        raise KubeconfigInvalid(
            f"cluster '{cluster_name}' in the kubeconfig: 'insecure-skip-tls-verify' must be a "
            "boolean (true or false, unquoted)"
        )
    if value and not allow_insecure_tls:
        raise KubeconfigUnsafe(
            f"cluster '{cluster_name}' in the kubeconfig sets 'insecure-skip-tls-verify: true', "
            "which disables server certificate verification; provide 'certificate-authority-data' "
            f"instead, or start the operator with {TLS_FLAG} to allow it"
        )


def _check_server(cluster_name: str, cluster: dict[str, Any], *, allow_insecure_tls: bool) -> str:
    server = cluster.get("server")
    if not isinstance(server, str) or not server.strip():
        raise KubeconfigInvalid(
            f"cluster '{cluster_name}' in the kubeconfig has no 'server'; set it to the provider "
            "API server URL (https://HOST:PORT) reachable from the operator"
        )
    server = server.strip()
    try:
        parts = urlsplit(server)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise KubeconfigInvalid(f"cluster '{cluster_name}' in the kubeconfig: 'server' is not a valid URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise KubeconfigInvalid(
            f"cluster '{cluster_name}' in the kubeconfig: 'server' must be an https:// URL with a host"
        )
    if parts.username is not None or parts.password is not None:
        raise KubeconfigInvalid(
            f"cluster '{cluster_name}' in the kubeconfig: 'server' must not embed credentials "
            "(user:password@); put them in the user entry instead"
        )
    if parts.scheme == "http" and not allow_insecure_tls:
        raise KubeconfigUnsafe(
            f"cluster '{cluster_name}' in the kubeconfig uses a plain http:// server, so credentials "
            f"would travel unencrypted; use https://, or start the operator with {TLS_FLAG} to allow it"
        )
    return server


def _check_files(cluster_name: str, cluster: dict[str, Any], user_name: str, user: dict[str, Any]) -> None:
    found = [f"cluster '{cluster_name}': '{f}'" for f in _CLUSTER_FILE_FIELDS if cluster.get(f) not in (None, "")]
    found += [f"user '{user_name}': '{f}'" for f in _USER_FILE_FIELDS if user.get(f) not in (None, "")]
    if found:
        raise KubeconfigUnsafe(
            f"the kubeconfig refers to files ({'; '.join(found)}); files in the operator pod are not "
            "available to peerings; embed the content instead (certificate-authority-data, "
            "client-certificate-data, client-key-data, token), e.g. kubectl config view --flatten --raw"
        )


def _check_exec(user_name: str, user: dict[str, Any], *, allow_exec: bool) -> None:
    found = [f for f in _EXEC_FIELDS if user.get(f) not in (None, {}, "")]
    if found and not allow_exec:
        listed = " and ".join(f"'{f}'" for f in found)
        raise KubeconfigUnsafe(
            f"user '{user_name}' in the kubeconfig uses {listed}, which runs a program inside the "
            "operator pod; use a token or client certificate data instead (e.g. a ServiceAccount "
            f"token), or start the operator with {EXEC_FLAG} to allow it"
        )


def load_remote_kubeconfig(
    raw: bytes | str,
    *,
    context: str | None,
    allow_exec: bool,
    allow_insecure_tls: bool,
) -> RemoteKubeconfig:
    """Parse ``raw``, select ``context`` (else current-context, else the only one), vet it.

    Raises ``KubeconfigInvalid`` or ``KubeconfigUnsafe``; their messages carry no credentials.
    """
    doc = parse_yaml(raw)
    if not isinstance(doc, dict):
        raise KubeconfigInvalid(
            f"the kubeconfig is YAML but not a mapping (got {type(doc).__name__}); store a complete "
            "kubeconfig file (apiVersion: v1, kind: Config) in the Secret"
        )
    clusters = _named_entries(doc, "clusters", "cluster")
    contexts = _named_entries(doc, "contexts", "context")
    users = _named_entries(doc, "users", "user")

    context_name = _select_context(doc, contexts, context)
    ctx = contexts[context_name]
    cluster_name = ctx.get("cluster")
    if not isinstance(cluster_name, str) or cluster_name not in clusters:
        raise KubeconfigInvalid(
            f"context '{context_name}' in the kubeconfig refers to cluster '{cluster_name or ''}', "
            f"which is not defined; available clusters: {_names(clusters)}"
        )
    user_name = ctx.get("user")
    if not isinstance(user_name, str) or user_name not in users:
        raise KubeconfigInvalid(
            f"context '{context_name}' in the kubeconfig refers to user '{user_name or ''}', "
            f"which is not defined; available users: {_names(users)}"
        )
    cluster = clusters[cluster_name]
    user = users[user_name]

    # Order: shape first (server), then the always-refused files, then the opt-in features.
    server = _check_server(cluster_name, cluster, allow_insecure_tls=allow_insecure_tls)
    _check_files(cluster_name, cluster, user_name, user)
    _check_tls_flag(cluster_name, cluster, allow_insecure_tls=allow_insecure_tls)
    _check_exec(user_name, user, allow_exec=allow_exec)

    narrowed_cluster = copy.deepcopy(cluster)
    narrowed_cluster["server"] = server
    narrowed: dict[str, Any] = {
        "apiVersion": doc.get("apiVersion", "v1") or "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": narrowed_cluster}],
        "users": [{"name": user_name, "user": copy.deepcopy(user)}],
        "contexts": [{"name": context_name, "context": copy.deepcopy(ctx)}],
        "current-context": context_name,
    }
    return RemoteKubeconfig(config=narrowed, server=server, context_name=context_name)


# A CA bundle in a spec: a few certificates, base64 of PEM (as `aws eks describe-cluster` prints it).
MAX_CA_DATA_BYTES = 16 * 1024


def cloud_kubeconfig(address: str, ca_data: str, cloud: CloudIdentity) -> RemoteKubeconfig:
    """The kubeconfig of a managed cluster reached with the operator's cloud identity: its address and CA (from
    the spec, vetted as a Secret's would be), no user credential (the cloud's SDK makes the token)."""
    name = f"{cloud.provider}/{cloud.location}/{cloud.cluster_name}"
    cluster: dict[str, Any] = {"server": address, "certificate-authority-data": ca_data}
    server = _check_server(name, cluster, allow_insecure_tls=False)
    try:
        pem = base64.b64decode(ca_data, validate=True)
    except ValueError:
        raise KubeconfigInvalid("spec.remoteCluster.certificateAuthorityData is not base64") from None
    if len(pem) > MAX_CA_DATA_BYTES or b"-----BEGIN CERTIFICATE-----" not in pem:
        raise KubeconfigInvalid(
            "spec.remoteCluster.certificateAuthorityData is not a PEM certificate (base64-encoded), as"
            " `aws eks describe-cluster` prints it under certificateAuthority.data"
        )
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {**cluster, "server": server}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return RemoteKubeconfig(config=config, server=server, context_name=name, cloud=cloud)
