"""The install pages' shell blocks, as tests/doc_blocks.py reads them for tests/e2e/test_docs_run.py: each one
is run or listed with the reason it is not, the placeholders of the ones run are replaced, and the extraction
finds what the pages hold. Editing a page's commands fails here until doc_blocks.BLOCKS says what to do with
them."""

from __future__ import annotations

import ast
import re

import pytest

from doc_blocks import (
    BLOCKS,
    PAGES,
    REPO,
    SUBSTITUTIONS,
    Block,
    Elsewhere,
    all_blocks,
    blocks,
    extract,
    runs,
    stale,
    unlisted,
)
from doc_blocks import (
    block as named_block,
)

# The test environment's values, as the end-to-end test fills them.
VALUES = {
    "registry": "198.18.0.1:5000",
    "provider_kubeconfig": "/tmp/docs-run/provider.kubeconfig",
    "provider_admin_kubeconfig": "/tmp/docs-run/provider-admin.kubeconfig",
    "consumer_id": "consumer-id",
    "provider_id": "provider-id",
    "registry_ca": "/tmp/docs-run/ca.crt",
    "release": "lpo-process",
    "release_namespace": "lpo-process",
}


def test_every_block_is_run_or_listed_with_a_reason() -> None:
    found = all_blocks()
    assert unlisted(found) == [], "name each block in doc_blocks.BLOCKS: None to run it, or why it cannot run"
    assert stale(found) == [], "an entry of doc_blocks.BLOCKS names no block, or several"
    assert all(how is None or isinstance(how, Elsewhere) or len(how) > 20 for how in BLOCKS.values())


def test_a_block_run_elsewhere_is_run_by_that_test() -> None:
    elsewhere = {entry: how for entry, how in BLOCKS.items() if isinstance(how, Elsewhere)}
    assert elsewhere, "the Flux and Argo CD guides' blocks run in their suites"
    for (page, start), how in elsewhere.items():
        assert (page, start) in block_calls(how.test), (page, start, how.test)
        assert named_block(page, start).elsewhere == how


def block_calls(test: str) -> set[tuple[str, str]]:
    """The (page, start) of each `doc_blocks.block(page, start)` call in tests/e2e/<test>, both literal strings."""
    found = set()
    for node in ast.walk(ast.parse((REPO / "tests" / "e2e" / test).read_text())):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "block"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "doc_blocks"
        ):
            continue
        args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(args) == len(node.args) == 2:
            found.add((args[0], args[1]))
    return found


def test_the_extraction_finds_each_pages_blocks() -> None:
    def firsts(page: str, run: bool) -> list[str]:
        return [" ".join(b.first.split()[:3]) for b in blocks(page) if (b.skipped is None) is run]

    assert firsts("docs/installation.md", run=True) == [
        "make release REGISTRY=registry.example.com/platform",
        "helm install liqo-peering-operator",
        "docker build -t",
        "helm install liqo-peering-operator",
        "src=registry.example.com/platform",
    ]
    assert firsts("docs/installation.md", run=False) == []
    # README's Install section only: build and push, then install and peer until Ready.
    assert firsts("README.md", run=True) == ["docker build -t", "helm install liqo-peering-operator"]
    readme = [b for b in blocks("README.md") if b.skipped is None][-1]
    assert "kubectl -n default wait --for=condition=Ready lp/provider" in readme.text
    assert "make demo" not in "".join(b.text for b in blocks("README.md"))  # "Try it" is another section
    assert firsts("docs/getting-started.md", run=True) == [
        "docker build -t",
        "helm install liqo-peering-operator",
        "kubectl -n liqo",
        "kubectl -n default",
        "kubectl apply -f",
        "kubectl -n default",
        "kubectl -n default",
        "kubectl -n default",
    ]
    assert firsts("docs/getting-started.md", run=False) == [
        "liqoctl generate peering-user",
        "liqoctl delete peering-user",
        "make demo #",
    ]
    for guide in ("docs/guides/flux.md", "docs/guides/argocd.md"):
        assert firsts(guide, run=True) == [] and len(firsts(guide, run=False)) == 1, guide
        assert not runs(guide)
    assert [page for page in PAGES if runs(page)] == ["docs/installation.md", "README.md", "docs/getting-started.md"]


def test_the_blocks_run_have_no_placeholder_left() -> None:
    ran = [b for b in all_blocks() if b.skipped is None or b.elsewhere is not None]
    for block in ran:
        commands = block.commands(VALUES)
        left = re.findall(r"\S*example\.com\S*|<[a-z-]+>|(?<![/\w])provider\.kubeconfig|\s-w\s*$", commands, re.M)
        assert not left, f"{block.page}:{block.line}: {left}"
    for placeholder in SUBSTITUTIONS:
        assert any(placeholder in b.text for b in ran), f"SUBSTITUTIONS: {placeholder!r} is in no block run"
    (release,) = [b for b in ran if b.first.startswith("make release")]
    assert (
        release.commands(VALUES).strip()
        == "make -o venv -o tools release REGISTRY=198.18.0.1:5000/platform VERSION=0.1.0"
    )


def test_the_extraction_reads_sh_fences_only_and_keeps_to_the_section() -> None:
    text = """# Page

```sh
echo one
```

```yaml
not: a command
```

## Install

1. In a list item:

    ```sh
    echo two \\
      --flag
    ```

```console
$ echo output
```

## Next

```sh
echo three
```
"""
    assert [(b.line, b.text) for b in extract(text, "page.md")] == [
        (3, "echo one\n"),
        (15, "echo two \\\n  --flag\n"),
        (26, "echo three\n"),
    ]
    assert extract(text, "page.md", "## Install") == [Block("page.md", 15, "echo two \\\n  --flag\n")]
    with pytest.raises(ValueError, match="never closed"):
        extract("```sh\necho\n", "page.md")
