"""Property: redact() removes every credential, wherever it sits in arbitrary text, and leaves ordinary
prose alone, including prose that uses "Secret", "token", "key" or "password" as words.

What counts as a credential is what looks like one: a value after a credential key (``token: ...``,
``password=...``, ``"client-key-data": "..."``), an Authorization header, a bearer or basic credential,
a JWT, a PEM block, URL userinfo, a bootstrap token, a long base64 blob. Two shapes are prose by
design (see redact()): ``key: word more words`` (a sentence about the key) and a scheme followed by a
plain word ("Bearer token required"); the credentials drawn here are never plain words.
"""

from __future__ import annotations

import base64
import re
import string

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from liqo_peering.redact import redact

SETTINGS = settings(max_examples=150)

# -- credentials -------------------------------------------------------------------------------

WORD = re.compile(r"[A-Za-z]{1,20}")  # what redact() reads as a word, never as a credential
TOKEN_CHARS = string.ascii_letters + string.digits + "._~+/-"
# Not a word either once a sentence's closing punctuation is taken off ("Bearer AAAAAAA." is prose to redact()).
tokens = st.text(TOKEN_CHARS, min_size=8, max_size=60).filter(lambda v: not WORD.fullmatch(v.rstrip(",;:.!?})]")))
# Passwords: any printable run without whitespace, not starting with a quote (that is a quoted value).
passwords = st.text(st.characters(codec="utf-8", exclude_categories=["Z", "C"]), min_size=6, max_size=30).filter(
    lambda v: not WORD.fullmatch(v) and v[0] not in "\"'[" and v.strip(",;:.!?})]\"'") == v
)
# Quoted values may hold spaces, not their quote or a line break.
quoted = st.text(st.characters(codec="utf-8", exclude_categories=["C"], exclude_characters="\"'\\"), min_size=6)
KEYS = [
    "token", "Token", "TOKEN", "access_token", "access-token", "id-token", "refresh_token", "auth-token",
    "password", "Password", "passwd", "client-secret", "client_secret", "client-key-data", "clientKeyData",
    "client-certificate-data", "certificate-authority-data", "private-key", "privateKey", "signedNonce", "nonce",
]  # fmt: skip
keys = st.sampled_from(KEYS)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@st.composite
def credentials(draw: st.DrawFn) -> tuple[str, str]:
    """(text carrying a credential, the credential itself)."""
    kind = draw(st.integers(0, 11))
    key = draw(keys)
    if kind == 0:
        secret = draw(tokens | passwords)
        sep = draw(st.sampled_from([": ", ":", "=", " = ", ":\t"]))
        return f"{key}{sep}{secret}", secret
    if kind == 1:
        secret = draw(quoted)
        q = draw(st.sampled_from(["'", '"']))
        return f"{q}{key}{q}: {q}{secret}{q}", secret
    if kind == 2:
        secret = draw(quoted)
        return f'{key}: "{secret}"', secret
    if kind == 3:
        secret = draw(tokens)
        return f"--{key}={secret}", secret
    if kind == 4:
        secret = draw(tokens)
        header = draw(st.sampled_from(["Authorization: Bearer ", "authorization=Bearer ", '"Authorization": "Bearer ']))
        return header + secret + ('"' if header.startswith('"') else ""), secret
    if kind == 5:
        user = draw(st.text(string.ascii_letters, min_size=1, max_size=8))
        secret = b64(f"{user}:{draw(passwords)}".encode())
        return f"{draw(st.sampled_from(['Authorization: Basic ', 'Basic ', 'basic ']))}{secret}", secret
    if kind == 6:
        secret = draw(tokens)
        return f"{draw(st.sampled_from(['Bearer', 'bearer', 'BEARER']))} {secret}", secret
    if kind == 7:
        parts = [draw(st.text(string.ascii_letters + string.digits + "_-", min_size=5, max_size=30)) for _ in range(2)]
        secret = "eyJ" + ".".join(parts) + "." + draw(st.text(string.ascii_letters + string.digits, max_size=30))
        return secret, secret
    if kind == 8:
        label = draw(st.sampled_from(["CERTIFICATE", "RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"]))
        body = draw(st.text(string.ascii_letters + string.digits + "+/=\n", min_size=1, max_size=120))
        end = draw(st.sampled_from([f"\n-----END {label}-----", ""]))  # a truncated block too
        return f"-----BEGIN {label}-----\n{body}{end}", body
    if kind == 9:
        secret = draw(st.text(string.ascii_letters + string.digits + "._~-", min_size=1, max_size=20))
        user = draw(st.text(string.ascii_letters, min_size=1, max_size=8))
        scheme = draw(st.sampled_from(["https", "http", "git+ssh"]))
        assume(secret not in f"{scheme}://{user}:@host.example/x")  # else the URL itself would "leak" it
        return f"{scheme}://{user}:{secret}@host.example/x", secret
    if kind == 10:
        secret = draw(st.text(string.ascii_lowercase + string.digits, min_size=6, max_size=6))
        secret += "." + draw(st.text(string.ascii_lowercase + string.digits, min_size=16, max_size=16))
        return secret, secret
    secret = b64(draw(st.binary(min_size=30, max_size=90)))
    if not (re.search("[A-Z]", secret) and re.search("[a-z]", secret) and re.search("[0-9]", secret)):
        secret = "Ab1" + secret  # a blob mixes cases and digits; runs of one kind are names or paths
    return secret, secret


before = st.sampled_from([" ", "\n", "\t", " (", " {", ", ", ": "])
after = st.sampled_from([" ", "\n", ", ", "; ", ") ", "} "])


@SETTINGS
@given(st.text(max_size=40), before, credentials(), after, st.text(max_size=40))
@example("", " ", ("token: token: s3cr3t-0", "s3cr3t-0"), " ", "")
@example("Authorization:", " ", ("token: s3cr3t-0", "s3cr3t-0"), " ", "")
@example("token:", " ", ("Bearer s3cr3t-0", "s3cr3t-0"), " ", "")
@example("", " ", ("Bearer AAAAAAA1.", "AAAAAAA1."), " ", "")
def test_every_credential_is_removed(prefix: str, left: str, cred: tuple[str, str], right: str, suffix: str) -> None:
    text, secret = cred
    assume(secret.strip() not in prefix + suffix)
    out = redact(prefix + left + text + right + suffix)
    assert "[REDACTED" in out
    residue = out.replace("[REDACTED PEM]", "\0").replace("[REDACTED]", "\0")  # "A" is in "[REDACTED]"
    assert secret.strip() not in residue
    assert redact(out) == out


# -- ordinary prose ----------------------------------------------------------------------------

KEYWORDS = ["Secret", "secret", "secrets", "token", "tokens", "Token", "key", "keys", "password", "passwords",
            "Password", "nonce", "authorization", "Authorization"]  # fmt: skip
SCHEMES = ["Bearer", "bearer", "basic", "Basic"]
WORDS = [*KEYWORDS, *SCHEMES, "auth", "authentication", "the", "a", "is", "was", "not", "found", "missing",
         "expired", "invalid", "rejected", "has", "no", "for", "kubeconfig", "LiqoPeering", "cluster", "provider",
         "consumer", "create", "it", "with", "under", "required", "failed", "Liqo", "signed", "yet"]  # fmt: skip
NAMES = ["default/kc", "team-a/provider-token", "ns/my-secret", "liqo-tenant-x/password", "ns/token",
         "kube-system/bootstrap-token-abcdef", "default/client-key-data", "provider-kubeconfig"]  # fmt: skip
QUOTED = ['"kubeconfig"', "'token'", "'password'", '"ca.crt"', "(keys: ca.crt, token)", "(keys: password)"]


@st.composite
def prose(draw: st.DrawFn) -> str:
    """A sentence of this vocabulary: keywords as words, names with a colon after them ("LiqoPeering
    ns/x-token: ..."), a keyword with a colon only before two more words ("the token: Secret ns/kc")."""
    parts = draw(
        st.lists(st.sampled_from(WORDS) | st.sampled_from(NAMES) | st.sampled_from(QUOTED), min_size=1, max_size=10)
    )
    out: list[str] = []
    for i, part in enumerate(parts):
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        if part in SCHEMES and nxt is not None and nxt not in WORDS:
            part += " the"  # a scheme before a non-word reads as a credential (module docstring)
        punct = draw(st.sampled_from(["", "", "", ",", ";", "."]))
        # "authorization: Bearer Secret" is a header with a token, not prose: no colon before a scheme.
        if part in NAMES or (part in KEYWORDS and nxt in WORDS and nxt not in SCHEMES and i + 2 < len(parts)):
            punct = draw(st.sampled_from([punct, ":"]))
        out.append(part + punct)
    return " ".join(out)


@SETTINGS
@given(prose())
@example("Secret ns/name not found")
@example("LiqoPeering default/x-token: Secret default/kc not found; create it")
@example("the password: is wrong for it")
@example("basic auth failed")
@example("Secret Bearer Secret default/kc authorization Bearer Secret")
def test_ordinary_prose_is_unchanged(text: str) -> None:
    assert redact(text) == text


@SETTINGS
@given(st.text(max_size=200))
def test_redact_is_idempotent_on_any_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
