"""Scrub credential-looking material from arbitrary text (API errors, exception messages) before it goes to
status, Events or logs: PEM blocks, credentials in URLs, JWTs and bootstrap tokens, long base64 runs, and the
values of credential-bearing keys (``token: ...``, ``Authorization: Bearer ...``), prose left alone.

Pure: every message the operator writes goes through ``redact``.
"""

from __future__ import annotations

import base64
import binascii
import re

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
