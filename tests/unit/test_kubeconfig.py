"""Unit tests for liqo_peering.kubeconfig (pure: no cluster, no network)."""

from __future__ import annotations

import base64
import copy
import socket
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from liqo_peering.clients.connect import CONNECTION_POOL_SIZE, USER_AGENT, to_api_client
from liqo_peering.errors import PeeringError
from liqo_peering.kubeconfig import (
    EXEC_FLAG,
    TLS_FLAG,
    KubeconfigError,
    KubeconfigInvalid,
    KubeconfigUnsafe,
    RemoteKubeconfig,
    load_remote_kubeconfig,
)
from liqo_peering.redact import redact

# Fake credential material: every test checks none of it leaks into error messages.
TOKEN = "s3cr3t-T0ken-abcdefghijklmnopqrstuvwxyz-0123456789"
PASSWORD = "hunter2-P4ssw0rd-very-secret"
CA_DATA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIBfakeCAcertificateDataForTests0123=\n-----END CERTIFICATE-----\n"
).decode()
CERT_DATA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIBclientCERTdata0123456789\n-----END CERTIFICATE-----\n"
).decode()
KEY_DATA = base64.b64encode(
    b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANclientKEYdata0123456789\n-----END PRIVATE KEY-----\n"
).decode()
SECRETS = (TOKEN, PASSWORD, CA_DATA, CERT_DATA, KEY_DATA)


def make_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "provider",
                "cluster": {"server": "https://provider.example:6443", "certificate-authority-data": CA_DATA},
            },
            {
                "name": "other",
                "cluster": {"server": "https://other.example:6443", "certificate-authority": "/etc/ca"},
            },
        ],
        "users": [
            {"name": "admin", "user": {"token": TOKEN}},
            {"name": "certuser", "user": {"client-certificate-data": CERT_DATA, "client-key-data": KEY_DATA}},
            {"name": "basic", "user": {"username": "bob", "password": PASSWORD}},
            {
                "name": "execuser",
                "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}},
            },
        ],
        "contexts": [
            {"name": "provider-admin", "context": {"cluster": "provider", "user": "admin"}},
            {
                "name": "provider-cert",
                "context": {"cluster": "provider", "user": "certuser", "namespace": "liqo"},
            },
            {"name": "provider-basic", "context": {"cluster": "provider", "user": "basic"}},
            {"name": "other-exec", "context": {"cluster": "other", "user": "execuser"}},
        ],
        "current-context": "provider-admin",
    }
    cfg.update(overrides)
    return cfg


def dump(cfg: Any) -> str:
    return yaml.safe_dump(cfg)


def load(
    cfg: Any, *, context: str | None = None, allow_exec: bool = False, allow_insecure_tls: bool = False
) -> RemoteKubeconfig:
    raw = cfg if isinstance(cfg, str | bytes) else dump(cfg)
    return load_remote_kubeconfig(raw, context=context, allow_exec=allow_exec, allow_insecure_tls=allow_insecure_tls)


def single(cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """A one-context kubeconfig with the given cluster and user bodies."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


def assert_no_secrets(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
    # Also no recognisable fragment of them.
    assert "s3cr3t" not in text
    assert "hunter2" not in text
    assert "BEGIN" not in text


# ----------------------------------------------------------------------------------------------
# Happy paths
# ----------------------------------------------------------------------------------------------


def test_current_context_is_used_and_config_is_narrowed() -> None:
    remote = load(make_config())
    assert remote.context_name == "provider-admin"
    assert remote.server == "https://provider.example:6443"
    cfg = remote.config
    assert cfg["current-context"] == "provider-admin"
    assert [c["name"] for c in cfg["clusters"]] == ["provider"]
    assert [u["name"] for u in cfg["users"]] == ["admin"]
    assert [c["name"] for c in cfg["contexts"]] == ["provider-admin"]
    assert cfg["users"][0]["user"]["token"] == TOKEN
    assert cfg["clusters"][0]["cluster"]["certificate-authority-data"] == CA_DATA


@pytest.mark.parametrize(
    ("context", "user"),
    [("provider-admin", "admin"), ("provider-cert", "certuser"), ("provider-basic", "basic")],
)
def test_explicit_context_selects_that_user(context: str, user: str) -> None:
    remote = load(make_config(), context=context)
    assert remote.context_name == context
    assert remote.config["users"][0]["name"] == user
    assert remote.config["current-context"] == context


def test_context_namespace_is_kept() -> None:
    remote = load(make_config(), context="provider-cert")
    assert remote.config["contexts"][0]["context"]["namespace"] == "liqo"


def test_unsafe_entries_outside_selected_context_are_ignored_and_dropped() -> None:
    # "other" cluster has a file CA and "execuser" runs exec, but they are not selected.
    remote = load(make_config(), context="provider-admin")
    text = dump(remote.config)
    assert "/etc/ca" not in text
    assert "aws" not in text


def test_single_context_without_current_context_is_used() -> None:
    cfg = single({"server": "https://x:6443"}, {"token": TOKEN})
    del cfg["current-context"]
    assert load(cfg).context_name == "ctx"


@pytest.mark.parametrize("raw_type", [str, bytes])
def test_accepts_str_and_bytes(raw_type: type) -> None:
    text = dump(make_config())
    raw = text if raw_type is str else text.encode()
    assert load(raw).server == "https://provider.example:6443"


def test_json_kubeconfig_is_accepted() -> None:
    import json

    assert load(json.dumps(make_config())).context_name == "provider-admin"


def test_server_whitespace_is_stripped() -> None:
    assert load(single({"server": "  https://x:6443 \n"}, {"token": TOKEN})).server == "https://x:6443"


def test_input_is_not_mutated_and_result_is_a_copy() -> None:
    cfg = make_config()
    before = copy.deepcopy(cfg)
    raw = dump(cfg)
    remote = load(raw)
    remote.config["users"][0]["user"]["token"] = "changed"
    assert cfg == before
    assert load(raw).config["users"][0]["user"]["token"] == TOKEN


def test_repr_hides_credentials() -> None:
    remote = load(make_config())
    assert_no_secrets(repr(remote))
    assert "provider-admin" in repr(remote)


def test_remote_kubeconfig_is_frozen() -> None:
    remote = load(make_config())
    with pytest.raises(AttributeError):
        remote.server = "https://evil:6443"  # type: ignore[misc]


def test_insecure_skip_tls_false_is_fine() -> None:
    remote = load(single({"server": "https://x:6443", "insecure-skip-tls-verify": False}, {"token": TOKEN}))
    assert remote.server == "https://x:6443"


# ----------------------------------------------------------------------------------------------
# Invalid
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        (b"\xff\xfe\x00garbage", "UTF-8"),
        ("clusters: [\n  - name: a\n token: " + TOKEN + "\n  bad: [", "not valid YAML"),
        ("key: value: " + TOKEN, "not valid YAML"),
        ("- just\n- a list\n", "not a mapping"),
        ("just a string " + TOKEN, "not a mapping"),
        ("42", "not a mapping"),
    ],
)
def test_unparseable_kubeconfig(raw: str | bytes, fragment: str) -> None:
    with pytest.raises(KubeconfigInvalid) as err:
        load(raw)
    assert fragment in err.value.message
    assert err.value.reason == "KubeconfigInvalid"
    assert_no_secrets(err.value.message)
    assert_no_secrets(str(err.value))


def test_yaml_error_reports_position_not_content() -> None:
    raw = "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: " + TOKEN + "\n   bad: [unclosed\n"
    with pytest.raises(KubeconfigInvalid) as err:
        load(raw)
    assert "line" in err.value.message
    assert_no_secrets(err.value.message)


@pytest.mark.parametrize("missing", ["clusters", "contexts", "users"])
@pytest.mark.parametrize("how", ["absent", "empty", "null"])
def test_missing_sections(missing: str, how: str) -> None:
    cfg = make_config()
    if how == "absent":
        del cfg[missing]
    elif how == "empty":
        cfg[missing] = []
    else:
        cfg[missing] = None
    with pytest.raises(KubeconfigInvalid) as err:
        load(cfg)
    assert f"no {missing}" in err.value.message
    assert_no_secrets(err.value.message)


@pytest.mark.parametrize("section", ["clusters", "contexts", "users"])
def test_section_not_a_list(section: str) -> None:
    with pytest.raises(KubeconfigInvalid, match=f"'{section}'.*must be a list"):
        load(make_config(**{section: {"a": 1}}))


@pytest.mark.parametrize("entry", [{"cluster": {"server": "https://x"}}, {"name": ""}, "string", {"name": 3}])
def test_unnamed_entry(entry: Any) -> None:
    cfg = make_config()
    cfg["clusters"].append(entry)
    with pytest.raises(KubeconfigInvalid, match="has no name"):
        load(cfg)


@pytest.mark.parametrize(("section", "index"), [("clusters", 0), ("contexts", 1), ("users", 2)])
def test_duplicate_names_rejected(section: str, index: int) -> None:
    cfg = make_config()
    cfg[section].append(copy.deepcopy(cfg[section][index]))
    with pytest.raises(KubeconfigInvalid) as err:
        load(cfg)
    assert "two entries named" in err.value.message
    assert_no_secrets(err.value.message)


def test_entry_body_not_a_mapping() -> None:
    cfg = make_config()
    cfg["users"][0]["user"] = "token " + TOKEN
    with pytest.raises(KubeconfigInvalid) as err:
        load(cfg)
    assert "'user' must be a mapping" in err.value.message
    assert_no_secrets(err.value.message)


def test_requested_context_not_found_lists_names() -> None:
    with pytest.raises(KubeconfigInvalid) as err:
        load(make_config(), context="nope")
    msg = err.value.message
    assert "'nope'" in msg
    for name in ("provider-admin", "provider-cert", "provider-basic", "other-exec"):
        assert name in msg
    assert_no_secrets(msg)


def test_current_context_not_found_lists_names() -> None:
    with pytest.raises(KubeconfigInvalid) as err:
        load(make_config(**{"current-context": "gone"}))
    assert "current-context 'gone'" in err.value.message
    assert "provider-admin" in err.value.message


def test_no_current_context_with_several_contexts() -> None:
    cfg = make_config()
    del cfg["current-context"]
    with pytest.raises(KubeconfigInvalid) as err:
        load(cfg)
    assert "no current-context" in err.value.message
    assert "provider-cert" in err.value.message


@pytest.mark.parametrize("field", ["cluster", "user"])
def test_context_references_undefined_entry(field: str) -> None:
    cfg = make_config()
    cfg["contexts"][0]["context"][field] = "ghost"
    with pytest.raises(KubeconfigInvalid) as err:
        load(cfg)
    assert f"{field} 'ghost'" in err.value.message
    assert "not defined" in err.value.message


@pytest.mark.parametrize(
    ("cluster", "fragment"),
    [
        ({}, "has no 'server'"),
        ({"server": ""}, "has no 'server'"),
        ({"server": None}, "has no 'server'"),
        ({"server": 6443}, "has no 'server'"),
        ({"server": "provider.example:6443"}, "https:// URL"),
        ({"server": "ftp://provider.example"}, "https:// URL"),
        ({"server": "https://"}, "https:// URL"),
        ({"server": "https://host:notaport"}, "not a valid URL"),
        ({"server": f"https://admin:{PASSWORD}@host:6443"}, "must not embed credentials"),
    ],
)
def test_bad_server(cluster: dict[str, Any], fragment: str) -> None:
    with pytest.raises(KubeconfigInvalid) as err:
        load(single(cluster, {"token": TOKEN}))
    assert fragment in err.value.message
    assert_no_secrets(err.value.message)


@pytest.mark.parametrize("value", ["false", "true", "yes", 0, 1, None])
def test_insecure_skip_tls_must_be_boolean(value: Any) -> None:
    # The Python client computes `not value`: the string "false" would silently disable verification.
    cfg = single({"server": "https://x:6443", "insecure-skip-tls-verify": value}, {"token": TOKEN})
    with pytest.raises(KubeconfigInvalid, match="must be a boolean"):
        load(cfg, allow_insecure_tls=True)


# ----------------------------------------------------------------------------------------------
# Unsafe
# ----------------------------------------------------------------------------------------------

SAFE_CLUSTER = {"server": "https://x:6443", "certificate-authority-data": CA_DATA}

# (cluster, user, flag that allows it or None = never allowed, field named in the message)
UNSAFE_CASES = [
    pytest.param(SAFE_CLUSTER, {"exec": {"command": "/bin/sh", "args": ["-c", "id"]}}, "exec", "'exec'", id="exec"),
    pytest.param(
        SAFE_CLUSTER,
        {"exec": {"command": "aws", "env": [{"name": "AWS_SECRET", "value": PASSWORD}]}, "token": TOKEN},
        "exec",
        "'exec'",
        id="exec-with-token",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"auth-provider": {"name": "oidc", "config": {"id-token": TOKEN, "client-secret": PASSWORD}}},
        "exec",
        "'auth-provider'",
        id="auth-provider-oidc",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/usr/bin/gcloud", "access-token": TOKEN}}},
        "exec",
        "'auth-provider'",
        id="auth-provider-gcp-cmd-path",
    ),
    pytest.param(
        {"server": "https://x:6443", "insecure-skip-tls-verify": True},
        {"token": TOKEN},
        "tls",
        "insecure-skip-tls-verify",
        id="insecure-skip-tls-verify",
    ),
    pytest.param({"server": "http://x:8080"}, {"token": TOKEN}, "tls", "http://", id="plain-http"),
    pytest.param(
        {"server": "https://x", "certificate-authority": "/etc/kubernetes/pki/ca.crt"},
        {"token": TOKEN},
        None,
        "'certificate-authority'",
        id="certificate-authority-file",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"client-certificate": "/var/run/c.crt", "client-key-data": KEY_DATA},
        None,
        "'client-certificate'",
        id="client-certificate-file",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"client-certificate-data": CERT_DATA, "client-key": "/var/run/c.key"},
        None,
        "'client-key'",
        id="client-key-file",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
        None,
        "'tokenFile'",
        id="tokenFile",
    ),
    pytest.param(
        SAFE_CLUSTER,
        {"token-file": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
        None,
        "'token-file'",
        id="token-file",
    ),
    pytest.param(
        {"server": "https://x", "insecure-skip-tls-verify": True, "certificate-authority": "/ca"},
        {"exec": {"command": "x"}, "tokenFile": "/t"},
        None,
        "'certificate-authority'",
        id="file-refusal-wins-over-flags",
    ),
]


@pytest.mark.parametrize(("cluster", "user", "flag", "field"), UNSAFE_CASES)
def test_unsafe_refused_by_default(cluster: dict[str, Any], user: dict[str, Any], flag: str | None, field: str) -> None:
    with pytest.raises(KubeconfigUnsafe) as err:
        load(single(cluster, user))
    msg = err.value.message
    assert err.value.reason == "KubeconfigUnsafe"
    assert field in msg
    if flag == "exec":
        assert EXEC_FLAG in msg
    elif flag == "tls":
        assert TLS_FLAG in msg
    else:
        assert EXEC_FLAG not in msg and TLS_FLAG not in msg
        assert "embed" in msg
    assert_no_secrets(msg)
    assert_no_secrets(str(err.value))
    # Paths named by the user are not echoed either (only field names).
    assert "/var/run" not in msg and "/etc/kubernetes" not in msg


def test_all_file_references_are_named_at_once() -> None:
    cluster = {"server": "https://x:6443", "certificate-authority": "/ca"}
    user = {"client-certificate": "/c", "client-key": "/k", "tokenFile": "/t"}
    with pytest.raises(KubeconfigUnsafe) as err:
        load(single(cluster, user))
    for field in ("certificate-authority", "client-certificate", "client-key", "tokenFile"):
        assert f"'{field}'" in err.value.message


@pytest.mark.parametrize(("cluster", "user", "flag", "field"), UNSAFE_CASES)
def test_unsafe_with_its_flag(cluster: dict[str, Any], user: dict[str, Any], flag: str | None, field: str) -> None:
    cfg = single(cluster, user)
    if flag is None:
        # Files are refused even with every opt-in.
        with pytest.raises(KubeconfigUnsafe):
            load(cfg, allow_exec=True, allow_insecure_tls=True)
        return
    # The matching flag alone is enough...
    remote = load(cfg, allow_exec=flag == "exec", allow_insecure_tls=flag == "tls")
    assert remote.context_name == "ctx"
    # ...and the other flag alone is not.
    with pytest.raises(KubeconfigUnsafe):
        load(cfg, allow_exec=flag != "exec", allow_insecure_tls=flag != "tls")


@pytest.mark.parametrize("empty", [None, ""])
def test_empty_file_fields_are_not_references(empty: Any) -> None:
    cluster = {"server": "https://x:6443", "certificate-authority": empty}
    assert load(single(cluster, {"token": TOKEN, "tokenFile": empty})).server == "https://x:6443"


def test_errors_share_a_base_class() -> None:
    assert issubclass(KubeconfigError, PeeringError) and not KubeconfigError("x").transient
    assert issubclass(KubeconfigInvalid, KubeconfigError)
    assert issubclass(KubeconfigUnsafe, KubeconfigError)
    assert KubeconfigInvalid("m").reason == "KubeconfigInvalid"
    assert KubeconfigUnsafe("m").reason == "KubeconfigUnsafe"


# ----------------------------------------------------------------------------------------------
# to_api_client
# ----------------------------------------------------------------------------------------------


def bearer(api: k8s_client.ApiClient) -> str:
    """The Authorization header value the client will send."""
    value: str = api.configuration.auth_settings()["BearerToken"]["value"]
    return value


def test_to_api_client_token() -> None:
    remote = load(single({"server": "https://provider.example:6443"}, {"token": TOKEN}))
    api = to_api_client(remote)
    assert isinstance(api, k8s_client.ApiClient)
    assert api.configuration.host == "https://provider.example:6443"
    assert bearer(api) == f"Bearer {TOKEN}"
    assert api.configuration.verify_ssl is True
    # A fresh Configuration, not the process-wide default.
    assert api.configuration is not k8s_client.Configuration.get_default_copy()


def test_to_api_client_basic_auth_and_insecure_tls_opt_in() -> None:
    remote = load(
        single(
            {"server": "https://x:6443", "insecure-skip-tls-verify": True},
            {"username": "bob", "password": PASSWORD},
        ),
        allow_insecure_tls=True,
    )
    api = to_api_client(remote)
    assert api.configuration.verify_ssl is False
    expected = base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert bearer(api) == f"Basic {expected}"


def test_to_api_client_two_clients_are_independent() -> None:
    a = to_api_client(load(single({"server": "https://a:6443"}, {"token": "token-a"})))
    b = to_api_client(load(single({"server": "https://b:6443"}, {"token": "token-b"})))
    assert a.configuration.host == "https://a:6443"
    assert b.configuration.host == "https://b:6443"
    assert bearer(a) == "Bearer token-a"
    assert bearer(b) == "Bearer token-b"


# ----------------------------------------------------------------------------------------------
# redact
# ----------------------------------------------------------------------------------------------

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IkFCQyJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLWJ5dGVz"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234\nabcdEFGH\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"Unauthorized: Authorization: Bearer {TOKEN}", TOKEN),
        (f"header 'authorization': 'Bearer {TOKEN}'", TOKEN),
        (f"basic auth Basic {base64.b64encode(b'bob:' + PASSWORD.encode()).decode()} rejected", "Ym9i"),
        (f"token rejected: {JWT}", JWT),
        (f"key error\n{PEM}\nend", "MIIEpAIBAAKCAQEA1234"),
        ("truncated -----BEGIN CERTIFICATE-----\nMIIBfakeNoEnd", "MIIBfakeNoEnd"),
        (f"client-key-data: {KEY_DATA}", KEY_DATA),
        (f"certificate-authority-data={CA_DATA}", CA_DATA),
        (f'{{"token": "{TOKEN}", "kind": "x"}}', TOKEN),
        (f"password: {PASSWORD}", PASSWORD),
        (f"privateKey={PASSWORD}", PASSWORD),
        (f"bare blob {CERT_DATA} in text", CERT_DATA),
        ("bootstrap token abcdef.0123456789abcdef used", "abcdef.0123456789abcdef"),
        (f"dial https://admin:{PASSWORD}@host:6443/api failed", PASSWORD),
        (f"token: {TOKEN} rejected", TOKEN),
        (f"--token={TOKEN} --server=https://p:6443", TOKEN),
        ("password=hunter", "hunter"),
        ("password: hunter", "hunter"),  # a word, but nothing follows: a value, not a sentence
        ('password: "correct horse battery staple" was refused', "horse battery"),
        (f"token: token: {TOKEN}", TOKEN),  # the second key's value is not hidden by the first
        (f"client-secret: {TOKEN}", TOKEN),
        (f"signedNonce: {TOKEN}", TOKEN),
        ("Authorization: Basic YTpi", "YTpi"),  # base64 of a:b, letters only
        (f'{{"authorization": "Bearer {TOKEN}"}}', TOKEN),
        (f"curl -H 'Authorization: Bearer {TOKEN}' https://p:6443", TOKEN),
        (f"users:\n- name: admin\n  user:\n    token: {TOKEN}\n", TOKEN),
        (f"{{'password': '{PASSWORD}', 'username': 'bob'}}", PASSWORD),
    ],
)
def test_redact_removes_secrets(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED" in out


@pytest.mark.parametrize(
    "text",
    [
        "",
        'foreignclusters.core.liqo.io "abc" is forbidden: User "system:serviceaccount:liqo:op" cannot get',
        "Get https://provider.example:6443/api/v1/namespaces/liqo-tenant-cool-firefly/secrets: timeout",
        "secret kubeconfig-controlplane-3f2a1b4c-5d6e-7f80-9a1b-2c3d4e5f6a7b not found",
        "GatewayServer/liqo-tenant-x/gw-very-long-name-of-a-gateway-server-object-abc not ready",
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        # Prose about credentials, not credentials (these used to lose their words to [REDACTED]):
        "Secret ns/name not found",
        "Secret default/kc not found",
        "the token expired",
        'key "kubeconfig" missing',
        "password authentication failed",
        "Bearer token required",
        "basic auth failed",
        "the password: is wrong",
        "the token: Secret default/kc not found",
        "nonce: not yet signed by Liqo",
        "authorization: denied by the webhook",
        "Secret: default/kc not found",
        "LiqoPeering default/x-token: Secret default/kc not found; create it with the provider's kubeconfig",
        "LiqoPeering default/my-secret: current-context 'admin' not found in the kubeconfig",
        "LiqoPeering team-a/password: 'clusters' in the kubeconfig must be a list of named entries",
        "Secret team-a/provider-token has no key 'kubeconfig' (keys: ca.crt, token); add it",
    ],
)
def test_redact_keeps_ordinary_text(text: str) -> None:
    assert redact(text) == text


def test_redact_keeps_the_keys_and_the_surrounding_text() -> None:
    text = f'error: {{"token": "{TOKEN}", "kind": "x"}}, then token: {TOKEN}, retrying'
    assert redact(text) == 'error: {"token": "[REDACTED]", "kind": "x"}, then token: [REDACTED], retrying'
    assert redact(f"Authorization: Bearer {TOKEN}") == "Authorization: Bearer [REDACTED]"


def test_redact_is_idempotent() -> None:
    text = f"Bearer {TOKEN} token: {TOKEN} {PEM} {JWT}"
    once = redact(text)
    assert redact(once) == once
    assert_no_secrets(once)


def test_to_api_client_pools_enough_connections_for_concurrent_watches() -> None:
    api = to_api_client(load(single({"server": "https://a:6443"}, {"token": "token-a"})))
    assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] == CONNECTION_POOL_SIZE > 10
    assert api.user_agent == USER_AGENT and USER_AGENT.startswith("liqo-peering-operator/")


def test_the_api_clients_sockets_probe_an_idle_connection_as_client_go_does() -> None:
    """TCP keepalive on the connections themselves: a watch only reads, so a connection whose NAT state was
    lost is found by the first probe after 30 s idle, not by the watch's read timeout minutes later."""
    api = to_api_client(load(single({"server": "https://a:6443"}, {"token": "token-a"})))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        pool = api.rest_client.pool_manager.connection_from_url(f"http://127.0.0.1:{port}")
        conn: Any = pool._get_conn()  # urllib3's HTTPConnection, whose socket is .sock
        conn.connect()
        try:
            sock = conn.sock
            assert sock is not None
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 15
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 9
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1  # urllib3's own default kept
        finally:
            conn.close()
