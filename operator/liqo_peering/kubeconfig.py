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

Only the selected context (and the cluster and user it names) is vetted and kept; every other entry is
dropped, so nothing outside the narrowed config can ever be used.

Every error message names fields and entry names only, never values: tokens, passwords, keys and
certificate data never appear in ``KubeconfigError.message``. ``redact`` scrubs credential-looking
material from arbitrary text (API errors) before it goes to status, events or logs.

This module performs no cluster I/O and never imports the Kubernetes client (clients/connect.py
builds the client from a vetted kubeconfig).
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
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
class RemoteKubeconfig:
    """A vetted kubeconfig narrowed to one context.

    ``config`` holds credentials, so it is excluded from ``repr`` (and therefore from logs that
    print the object).
    """

    config: dict[str, Any] = field(repr=False)
    server: str
    context_name: str


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------


def _parse_yaml(raw: bytes | str) -> Any:
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
        return yaml.safe_load(text)
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
    doc = _parse_yaml(raw)
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


# --------------------------------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------------------------------

_REDACTED = "[REDACTED]"

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL)
_URL_USERINFO = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://(?P<cred>[^/\s@]+)@")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_BOOTSTRAP_TOKEN = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
# Long base64 runs (certificate / key data, opaque tokens): 40+ characters mixing upper case, lower
# case and digits (so long lower-case resource names and API paths survive).
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=_-])")

# A value: a quoted string up to its closing quote (or the end of the line), else everything up to the
# next whitespace; _value() gives trailing punctuation back (``token: abc,`` keeps the comma).
_VALUE = r"""(?P<value>"[^"\n]*"?|'[^'\n]*'?|[^\s"']\S*)"""
_TRAILING = ",;:.!?})]\"'"
# Credential-bearing keys. A bare "secret" is not one: in this operator's messages and the API
# server's it names the Kubernetes kind ("Secret ns/name not found"), and no kubeconfig or Liqo field
# holding a credential is called just that.
_SECRET_KEYS = (
    r"token|access[-_]?token|id[-_]?token|refresh[-_]?token|auth[-_]?token|password|passwd|client[-_]?secret|"
    r"client[-_]?key[-_]?data|client[-_]?certificate[-_]?data|certificate[-_]?authority[-_]?data|"
    r"private[-_]?key|signed[-_]?nonce|nonce"
)
# key: value / key=value / "key": "value". The key must stand alone: "ns/x-token:" or "my_password="
# are the tails of names (a peering called x-token), not keys.
_KEY_VALUE = re.compile(
    rf"(?i)(?<![\w/])(?<!\w-)(?P<key>(?P<q>[\"']?)(?:{_SECRET_KEYS})(?P=q))(?P<sep>[ \t]*[:=][ \t]*){_VALUE}"
)
# An Authorization header: the scheme stays, the credential goes.
_AUTHORIZATION = re.compile(
    rf"(?i)(?<![\w/])(?<!\w-)(?P<key>[\"']?authorization[\"']?)(?P<sep>[ \t]*[:=][ \t]*)"
    rf"(?P<scheme>[\"']?(?:bearer|basic|digest|negotiate)[ \t]+)?{_VALUE}"
)
# A bare scheme and credential ("Bearer abc..."), e.g. in a curl command line.
# A full stop after it ends the sentence ("... send Bearer tokens.").
_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic)[ \t]+(?P<value>[A-Za-z0-9._~+/=-]*[A-Za-z0-9_~+/=-])")
# A plain word: "the token: Secret ns/name not found", "Bearer token required". Real credentials are
# not short runs of letters (tokens mix digits and symbols, Basic credentials decode to user:password).
_WORD = re.compile(r"[A-Za-z]{1,20}")
# After a ": value" that is a word, more of the sentence on the same line: prose, not a key and value.
_SENTENCE_GOES_ON = re.compile(r"[,;:.!?)]*[ \t]+\S")

Span = tuple[int, int, str]


def _is_redacted(value: str) -> bool:
    return value.lstrip("\"'").startswith("[REDACTED")


def _is_basic_credential(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password``, as a Basic credential always is."""
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw


def _value(match: re.Match[str]) -> tuple[int, int, str]:
    """The value's span and text: an unquoted one without its trailing punctuation (trimmed here, not by
    the pattern, whose lookahead would make a long run of dots quadratic)."""
    start, end = match.span("value")
    value = match["value"]
    if value[0] not in "\"'":
        value = value[0] + value[1:].rstrip(_TRAILING)
        end = start + len(value)
    return start, end, value


def _value_span(match: re.Match[str]) -> Span:
    """The value without its quotes (so ``"token": "[REDACTED]"`` stays valid JSON-ish text)."""
    start, end, value = _value(match)
    if value[0] in "\"'":
        start += 1
        if len(value) > 1 and value[-1] == value[0]:
            end -= 1
    return start, end, _REDACTED


def _reads_as_prose(match: re.Match[str]) -> bool:
    """``key: word more words``: a sentence about the key ("the password: is wrong"), not its value."""
    _, end, value = _value(match)
    return (
        not match["key"].startswith(("'", '"'))
        and match["sep"].strip() == ":"
        and match["sep"].endswith((" ", "\t"))
        and _WORD.fullmatch(value) is not None
        and _SENTENCE_GOES_ON.match(match.string, end) is not None
    )


def _overlapping(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Every match, including those starting inside an earlier one: in "token: token: abc" the second
    key's value must not hide behind the first key's."""
    found, pos = [], 0
    while (match := pattern.search(text, pos)) is not None:
        found.append(match)
        pos = match.start() + 1
    return found


def _spans(text: str) -> list[Span]:
    """What to remove, each rule run on the original text (so no rule's output can hide a credential
    from another)."""
    spans: list[Span] = [(m.start(), m.end(), "[REDACTED PEM]") for m in _PEM.finditer(text)]
    for m in _overlapping(_URL_USERINFO, text):
        if not _is_redacted(m["cred"]):
            spans.append((*m.span("cred"), _REDACTED))
    for m in _overlapping(_AUTHORIZATION, text):
        if not _is_redacted(m["value"]) and (m["scheme"] or not _reads_as_prose(m)):
            spans.append(_value_span(m))
    for m in _overlapping(_KEY_VALUE, text):
        if not _is_redacted(m["value"]) and not _reads_as_prose(m):
            spans.append(_value_span(m))
    for m in _overlapping(_SCHEME, text):
        value = m["value"]
        basic = m["scheme"].lower() == "basic"
        if not _WORD.fullmatch(value) or (basic and _is_basic_credential(value)):
            spans.append((*m.span("value"), _REDACTED))
    spans += [(m.start(), m.end(), _REDACTED) for m in _JWT.finditer(text)]
    spans += [(m.start(), m.end(), _REDACTED) for m in _BOOTSTRAP_TOKEN.finditer(text)]
    for m in _BASE64_RUN.finditer(text):
        run = m.group(0)
        if any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run):
            spans.append((m.start(), m.end(), _REDACTED))
    return spans


def redact(text: str) -> str:
    """Remove credentials from ``text``: PEM blocks, URL userinfo, Authorization headers, bearer and
    basic credentials, JWTs, bootstrap tokens, base64 blobs and the values of credential keys
    (``token: ...``, ``password=...``, ``"client-key-data": "..."``).

    Ordinary prose survives: "Secret default/kc not found", "the token expired", "key "kubeconfig"
    missing", and ``key: word more words`` (a sentence, not a value). Idempotent.
    """
    if not text:
        return text
    spans = sorted(_spans(text))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    merged: list[Span] = []
    for start, end, label in spans:
        if merged and start <= merged[-1][1]:  # overlapping or touching: one placeholder
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, label))
    for start, end, label in merged:
        out += [text[pos:start], label]
        pos = end
    out.append(text[pos:])
    return "".join(out)
