"""Property: the kubeconfig rules never let through an exec or auth-provider plugin, a file reference or
insecure TLS unless the operator opted in (EXEC_FLAG, TLS_FLAG; file references have no flag), whatever
else the kubeconfig holds; and whatever the input, they fail only with a KubeconfigError.
"""

from __future__ import annotations

import contextlib
import copy
import tracemalloc
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from liqo_peering.kubeconfig import KubeconfigError, KubeconfigUnsafe, load_remote_kubeconfig

SETTINGS = settings(max_examples=100)

FILE_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile", "token-file"),
}
PLUGINS = ("exec", "auth-provider")

names = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=8)
# What a file reference or a plugin may look like: a path, a config mapping, or values nobody should write.
paths = st.sampled_from(["/etc/ca.crt", "ca.pem", "~/.kube/token", "../../etc/shadow", " "]) | names
plugin_configs: st.SearchStrategy[Any] = (
    st.fixed_dictionaries(
        {"command": st.sampled_from(["aws", "/bin/sh", "gke-gcloud-auth-plugin"])},
        optional={"apiVersion": st.just("client.authentication.k8s.io/v1"), "args": st.lists(names, max_size=2)},
    )
    | st.fixed_dictionaries({"name": st.sampled_from(["oidc", "gcp", "azure"])}, optional={"config": st.builds(dict)})
    | paths
)
safe_users = st.sampled_from(
    [
        {"token": "abc123-token"},
        {"username": "bob", "password": "pw"},
        {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"},
        {},
    ]
)
schemes = st.sampled_from(["https", "http", "HTTPS", "Http"])


@st.composite
def kubeconfigs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A kubeconfig whose selected entries carry some of the features under test, and those features."""
    features: dict[str, Any] = {
        "files": draw(
            st.lists(
                st.sampled_from([f"{kind}:{f}" for kind, fs in FILE_FIELDS.items() for f in fs]),
                unique=True,
                max_size=2,
            )
        ),
        "plugins": draw(st.lists(st.sampled_from(PLUGINS), unique=True, max_size=2)),
        "insecure": draw(st.sampled_from([None, True, False])),
        "scheme": draw(schemes),
    }
    cluster: dict[str, Any] = {"server": f"{features['scheme']}://provider.example:6443"}
    if draw(st.booleans()):
        cluster["certificate-authority-data"] = "Y2E="
    user: dict[str, Any] = dict(draw(safe_users))
    for entry in features["files"]:
        kind, field = entry.split(":")
        (cluster if kind == "cluster" else user)[field] = draw(paths)
    for plugin in features["plugins"]:
        user[plugin] = draw(plugin_configs)
    if features["insecure"] is not None:
        cluster["insecure-skip-tls-verify"] = features["insecure"]
    # Unsafe entries nobody selects are dropped, never refused.
    other_user = {"exec": {"command": "/bin/sh"}, "tokenFile": "/etc/token"}
    other_cluster = {"server": "http://other:80", "insecure-skip-tls-verify": True, "certificate-authority": "/x"}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "p", "cluster": cluster}, {"name": "o", "cluster": other_cluster}],
        "users": [{"name": "u", "user": user}, {"name": "o", "user": other_user}],
        "contexts": [
            {"name": "p", "context": {"cluster": "p", "user": "u"}},
            {"name": "o", "context": {"cluster": "o", "user": "o"}},
        ],
        "current-context": "p",
    }
    return config, features


@SETTINGS
@given(kubeconfigs(), st.booleans(), st.booleans(), st.booleans())
def test_unsafe_features_pass_only_with_their_flag(
    drawn: tuple[dict[str, Any], dict[str, Any]], allow_exec: bool, allow_tls: bool, as_text: bool
) -> None:
    config, features = drawn
    plain_http = features["scheme"].lower() == "http"
    refused = (
        bool(features["files"])
        or (bool(features["plugins"]) and not allow_exec)
        or ((features["insecure"] is True or plain_http) and not allow_tls)
    )
    raw: str | bytes = yaml.safe_dump(config) if as_text else yaml.safe_dump(config).encode()
    try:
        loaded = load_remote_kubeconfig(raw, context=None, allow_exec=allow_exec, allow_insecure_tls=allow_tls)
    except KubeconfigUnsafe:
        assert refused, features
        return
    assert not refused, features
    (cluster_entry,) = loaded.config["clusters"]
    (user_entry,) = loaded.config["users"]
    cluster, user = cluster_entry["cluster"], user_entry["user"]
    assert not any(cluster.get(f) for f in FILE_FIELDS["cluster"]) and not any(user.get(f) for f in FILE_FIELDS["user"])
    if not allow_exec:
        assert not any(user.get(p) for p in PLUGINS)
    if not allow_tls:
        assert cluster.get("insecure-skip-tls-verify") is not True
        assert loaded.server.lower().startswith("https://")
    assert [c["name"] for c in loaded.config["contexts"]] == ["p"]  # the others are gone


# Arbitrary YAML-ish documents: the loader's only way to fail is a KubeconfigError.
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=10)
    | st.sampled_from(
        ["https://h:6443", "http://h", "p", "u", "exec", "auth-provider", "tokenFile", "certificate-authority"]
    )
)
keys = st.sampled_from(
    [
        "name",
        "cluster",
        "user",
        "context",
        "server",
        "exec",
        "auth-provider",
        "tokenFile",
        "token-file",
        "certificate-authority",
        "client-certificate",
        "client-key",
        "insecure-skip-tls-verify",
        "token",
        "clusters",
        "users",
        "contexts",
        "current-context",
    ]
) | st.text(max_size=6)
documents = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5), max_leaves=25
)


def _containers(node: Any) -> list[Any]:
    found = [node] if isinstance(node, dict | list) else []
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        found += _containers(child)
    return found


@st.composite
def mangled_kubeconfigs(draw: st.DrawFn) -> Any:
    """A kubeconfig of kubeconfigs() with a few values replaced or added anywhere (wrong types, missing
    names, stray plugin or file keys), so every check of the loader is reached."""
    config, _ = draw(kubeconfigs())
    config = copy.deepcopy(config)  # mangled in place: no object a strategy hands out again may change
    for _ in range(draw(st.integers(1, 4))):
        node = draw(st.sampled_from(_containers(config)))
        if isinstance(node, dict):
            key = draw(st.sampled_from(sorted(node)) | keys) if node else draw(keys)
            node[key] = draw(documents)
        elif node:
            node[draw(st.integers(0, len(node) - 1))] = draw(documents)
    return config


@SETTINGS
@given(mangled_kubeconfigs() | documents, st.booleans(), st.booleans(), st.sampled_from([None, "p", "o"]))
def test_any_document_is_vetted_or_refused_with_a_kubeconfig_error(
    doc: Any, allow_exec: bool, allow_tls: bool, context: str | None
) -> None:
    try:
        loaded = load_remote_kubeconfig(
            yaml.safe_dump(doc), context=context, allow_exec=allow_exec, allow_insecure_tls=allow_tls
        )
    except KubeconfigError:
        return
    cluster = loaded.config["clusters"][0]["cluster"]
    user = loaded.config["users"][0]["user"]
    assert not any(cluster.get(f) not in (None, "") for f in FILE_FIELDS["cluster"])
    assert not any(user.get(f) not in (None, "") for f in FILE_FIELDS["user"])
    if not allow_exec:
        assert all(user.get(p) in (None, {}, "") for p in PLUGINS)
    if not allow_tls:
        assert cluster.get("insecure-skip-tls-verify") in (None, False)
        assert loaded.server.lower().startswith("https://")


# Hostile texts: alias and anchor bombs, deep nesting, long and odd unicode, tags, dates and numbers PyYAML
# resolves but cannot build, all spliced into a valid kubeconfig. The loader returns a RemoteKubeconfig or
# raises a KubeconfigError, never anything else, and stays small while doing it.
def _alias_bomb(width: int, levels: int) -> str:
    lines = [f"b0: &b0 [{', '.join(['x'] * width)}]"]
    lines += [f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


hostile_fragments = st.one_of(
    st.builds(_alias_bomb, st.integers(1, 12), st.integers(1, 12)),
    st.integers(1, 200).map(lambda n: "deep: " + "[" * n + "]" * n + "\n"),
    st.integers(1, 200).map(lambda n: "deep: " + "{a: " * n + "x" + "}" * n + "\n"),
    st.text(max_size=40).map(lambda t: f"extra: {t}\n"),
    st.text(st.characters(codec="utf-8"), max_size=40).map(lambda t: f"? {t}\n"),
    st.sampled_from(
        [
            "when: 2001-02-30\n",
            "n: " + "9" * 5000 + "\n",
            "n: 0x" + "f" * 5000 + "\n",
            "n: 1:" + "59:" * 200 + "1\n",
            "f: 1e99999\n",
            "b: !!binary '@@@'\n",
            "s: !!set {a, b}\n",
            "o: !!python/object:os.system {}\n",
            "? [a, b]\n: c\n",
            "<<: {clusters: 1}\n",
            "\ufeffbom: x\n",
            "z: \u202e\u0000\n",
            "---\nsecond: document\n",
            "%YAML 1.1\n---\n",
        ]
    ),
)


@settings(max_examples=100, deadline=None)
@given(kubeconfigs(), st.lists(hostile_fragments, min_size=1, max_size=3), st.integers(0, 2), st.booleans())
def test_hostile_yaml_is_refused_with_a_kubeconfig_error_in_little_memory(
    drawn: tuple[dict[str, Any], dict[str, Any]], fragments: list[str], where: int, as_bytes: bool
) -> None:
    config, _ = drawn
    parts = [yaml.safe_dump(config)]
    for fragment in fragments:
        parts.insert(min(where, len(parts)), fragment)
    text = "".join(parts)
    raw: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    tracemalloc.start()
    try:
        try:
            loaded = load_remote_kubeconfig(raw, context=None, allow_exec=True, allow_insecure_tls=True)
        except KubeconfigError:
            return
        finally:
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak
    assert loaded.config["current-context"] == loaded.context_name


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2048) | st.text(max_size=512))
def test_arbitrary_bytes_are_vetted_or_refused_with_a_kubeconfig_error(raw: bytes | str) -> None:
    with contextlib.suppress(KubeconfigError):
        load_remote_kubeconfig(raw, context=None, allow_exec=False, allow_insecure_tls=False)
