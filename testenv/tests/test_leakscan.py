"""The leak scan's needles and search (testenv.leakscan), without clusters."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from testenv.leakscan import LeakScan, needles_of_secret, needles_of_value, search

KEY_LINES = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj", "MgkWJyC4Ot3ihJ0cTf2Rg5D1xSsV"]
KEY_PEM = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(KEY_LINES) + "\n-----END PRIVATE KEY-----\n"
CA_PEM = (
    "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n"
    "-----END CERTIFICATE-----\n"
)
TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.payload.signature"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig() -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "p",
                    "cluster": {"server": "https://198.18.0.1:6443", "certificate-authority-data": b64(CA_PEM)},
                }
            ],
            "users": [{"name": "u", "user": {"client-key-data": b64(KEY_PEM), "token": TOKEN}}],
            "contexts": [{"name": "p", "context": {"cluster": "p", "user": "u"}}],
            "current-context": "p",
        }
    )


def test_a_kubeconfig_yields_its_user_secrets_not_its_server_or_ca() -> None:
    needles = needles_of_value(kubeconfig())
    assert TOKEN in needles and b64(KEY_PEM) in needles
    assert set(KEY_LINES) <= needles  # the key's PEM body, line by line
    assert not any("198.18.0.1" in n for n in needles)
    assert b64(CA_PEM) not in needles and not any(n in CA_PEM for n in needles)


def test_short_values_are_not_needles() -> None:
    assert needles_of_value("true") == set()


def test_a_secret_skips_ca_keys_and_helm_releases() -> None:
    secret = {
        "metadata": {"namespace": "ns", "name": "s"},
        "data": {"ca.crt": b64(CA_PEM), "nonce": b64("a-nonce-of-some-length"), "kubeconfig": b64(kubeconfig())},
    }
    needles = needles_of_secret(secret, "consumer")
    assert needles["a-nonce-of-some-length"] == "consumer Secret ns/s key nonce"
    assert TOKEN in needles and b64("a-nonce-of-some-length") in needles
    assert not any(n in CA_PEM for n in needles)
    assert needles_of_secret({**secret, "type": "helm.sh/release.v1"}, "consumer") == {}


def test_search_finds_a_credential_in_a_log_line(tmp_path: Path) -> None:
    scan = LeakScan()
    scan.needles.update(dict.fromkeys(needles_of_value(kubeconfig()), "cred"))
    log = tmp_path / "operator.log"
    log.write_text('{"event": "ok"}\n{"event": "bad ' + KEY_LINES[1] + '"}\n')
    scan.add_log(log)
    scan.add_text("consumer Event ns/e", "Secret ns/provider-kubeconfig not found")
    findings = scan.findings()
    assert [(f.credential, f.where) for f in findings] == [("cred", f"{log} line 2")]


def test_search_finds_nothing_in_ordinary_text() -> None:
    assert search({TOKEN: "cred"}, {"status": '{"message": "Secret team-a/provider-kubeconfig not found"}'}) == []


def test_a_value_nested_too_deep_or_shaped_oddly_is_a_needle_of_its_own() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert needles_of_value(deep) == {deep}
    odd = "users: [[a], 7, {user: [x]}]\n# a comment that makes it long enough"
    assert needles_of_value(odd) == set()
