"""The kubeconfig is read within bounds: size, nesting depth, node count, no YAML anchors or aliases. Each
refusal is a KubeconfigInvalid naming the bound, at once and in little memory."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
import yaml

from liqo_peering import kubeconfig
from liqo_peering.kubeconfig import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    KubeconfigInvalid,
    RemoteKubeconfig,
    load_remote_kubeconfig,
    parse_yaml,
)

TOKEN = "s3cr3t-T0ken-abcdefghijklmnopqrstuvwxyz-0123456789"
GOOD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "p", "cluster": {"server": "https://provider.example:6443"}}],
    "users": [{"name": "u", "user": {"token": TOKEN}}],
    "contexts": [{"name": "p", "context": {"cluster": "p", "user": "u"}}],
    "current-context": "p",
}


def alias_bomb() -> str:
    """Nine anchors, each a list of nine aliases of the previous one: 9**9 leaves once expanded."""
    lines = [f"a0: &a0 [{', '.join([TOKEN] * 9)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return yaml.safe_dump(GOOD) + "\n".join(lines) + "\n"


def load(raw: str | bytes) -> RemoteKubeconfig:
    return load_remote_kubeconfig(raw, context=None, allow_exec=False, allow_insecure_tls=False)


def refusal(raw: str | bytes) -> str:
    with pytest.raises(KubeconfigInvalid) as caught:
        load(raw)
    message = caught.value.message
    assert TOKEN not in message
    return message


def test_the_alias_bomb_is_refused_at_once_in_little_memory() -> None:
    bomb = alias_bomb()
    assert len(bomb) < 2048
    tracemalloc.start()
    try:
        message = refusal(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    first_anchor = len(yaml.safe_dump(GOOD).splitlines()) + 1
    assert f"anchors or aliases (line {first_anchor})" in message
    assert peak < 4 * 1024 * 1024, peak


@pytest.mark.parametrize(
    "doc",
    [
        # An anchor alone is refused too: nothing in a kubeconfig needs one.
        "clusters: &c [{name: p, cluster: {server: 'https://h'}}]\n",
        "x: &a 1\ny: *a\n",
        "base: &b {server: 'https://h'}\nclusters: [{name: p, cluster: {<<: *b}}]\n",
    ],
)
def test_anchors_and_aliases_are_refused(doc: str) -> None:
    assert "YAML anchors or aliases" in refusal(doc)


def test_a_kubeconfig_over_the_size_bound_is_refused_before_parsing() -> None:
    raw = yaml.safe_dump(GOOD).encode()
    big = raw + b"#" + b"x" * (MAX_BYTES - len(raw))
    assert f"larger than {MAX_BYTES} bytes" in refusal(big)
    assert f"larger than {MAX_BYTES} bytes" in refusal(big.decode())
    # Not parsed: invalid YAML past the bound is still refused for its size.
    assert "larger than" in refusal(b"\x00" * (MAX_BYTES + 1))
    assert load(big[:MAX_BYTES]).context_name == "p"


def test_nesting_deeper_than_the_bound_is_refused() -> None:
    def nested(levels: int) -> dict[str, Any]:
        # GOOD's root mapping is level 1, "extra" is a scalar at level 2: each list adds one.
        value: Any = "x"
        for _ in range(levels - 2):
            value = [value]
        return {**GOOD, "extra": value}

    assert load(yaml.safe_dump(nested(MAX_DEPTH))).context_name == "p"
    assert f"nests deeper than {MAX_DEPTH} levels" in refusal(yaml.safe_dump(nested(MAX_DEPTH + 1)))
    assert "nests deeper" in refusal("[" * 100_000 + "]" * 100_000)


def test_more_nodes_than_the_bound_are_refused() -> None:
    many = {**GOOD, "extensions": ["x"] * MAX_NODES}
    assert f"more than {MAX_NODES} YAML nodes" in refusal(yaml.safe_dump(many))


@pytest.mark.parametrize(
    "value",
    [
        "2001-02-30",  # a date PyYAML resolves but cannot build
        "1" * 5000,  # beyond Python's integer digits limit
    ],
)
def test_an_unbuildable_scalar_is_invalid_without_its_value(value: str) -> None:
    message = refusal(yaml.safe_dump(GOOD) + f"x: {value}\n")
    assert value not in message


def test_parse_yaml_is_the_bounded_reader_for_other_kubeconfigs() -> None:
    assert parse_yaml(yaml.safe_dump(GOOD)) == GOOD
    with pytest.raises(KubeconfigInvalid):
        parse_yaml(alias_bomb())


def test_the_parser_is_libyaml() -> None:
    """PyYAML's C parser: the pure-Python one takes seconds over a 1 MiB document, libyaml milliseconds."""
    assert kubeconfig._LOADER is yaml.CSafeLoader
