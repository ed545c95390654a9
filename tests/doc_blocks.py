"""The shell commands of the pages that say how to install and use the operator: the ```sh blocks of README.md's
Install section, docs/installation.md, docs/getting-started.md, the Flux, Argo CD and Cluster API guides, and
Working with LiqoPeerings.

BLOCKS lists each of them, by page and first line: run as written (after SUBSTITUTIONS) by
tests/e2e/test_docs_run.py, run as written by the end-to-end test where what it needs runs (``Elsewhere``:
the Flux and Argo CD suites, the real Liqo suite for liqoctl's, `make demo`'s own, and the Cluster API fleet's),
or not run, with the
reason. A block in none of these fails that test and tests/unit/test_doc_blocks.py, which reads the pages
without clusters.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The pages, in the order the end-to-end test runs them, each with the section its blocks are taken from (None:
# the whole page).
PAGES: dict[str, str | None] = {
    "docs/installation.md": None,
    "README.md": "## Install",
    "docs/getting-started.md": None,
    "docs/guides/flux.md": None,
    "docs/guides/argocd.md": None,
    "docs/guides/cluster-api.md": None,
    "docs/guides/working-with-liqopeerings.md": None,
}

# The one table of what the pages leave to the reader, and what it is in the test environment: the values
# are filled from the environment's `registry` (the host of its OCI registry) and `provider_kubeconfig` (the
# provider cluster's kubeconfig file).
SUBSTITUTIONS: dict[str, str] = {
    # Your registry, and a mirror of it: two paths on the test's registry, which the nodes trust.
    "registry.example.com/platform": "{registry}/platform",
    "mirror.example.com/platform": "{registry}/mirror",
    # The provider's kubeconfig for the operator: written by liqoctl, read into the Secret.
    "> provider.kubeconfig": "> {provider_kubeconfig}",
    "--from-file=kubeconfig=provider.kubeconfig": "--from-file=kubeconfig={provider_kubeconfig}",
    # The provider's administrator's kubeconfig, and the consumer's cluster ID, for liqoctl.
    "--kubeconfig provider-admin.kubeconfig": "--kubeconfig {provider_admin_kubeconfig}",
    "<consumer-id>": "{consumer_id}",
    # The harness built the venv and the tools already; `make tools` would also build the oldest Kubernetes,
    # which another tier builds meanwhile.
    "make release ": "make -o venv -o tools release ",
    # A watch never ends: the peerings are listed once.
    "kubectl -n default get lp -o wide -w": "kubectl -n default get lp -o wide",
    # The operator's release, as the suite installed it.
    "helm upgrade liqo-peering-operator deploy/helm/liqo-peering-operator -n liqo-peering ": (
        "helm upgrade {release} deploy/helm/liqo-peering-operator -n {release_namespace} "
    ),
    # Your registry's CA certificate.
    "/path/to/ca.crt": "{registry_ca}",
    # The provider's new kubeconfig, and its cluster ID (its ForeignCluster's name).
    "--from-file=kubeconfig=provider-new.kubeconfig": "--from-file=kubeconfig={provider_kubeconfig}",
    "<provider-id>": "{provider_id}",
}


@dataclass(frozen=True)
class Elsewhere:
    """A block run as written by another end-to-end test, the one where what it needs runs (``block`` finds
    it there, ``run`` runs it)."""

    test: str  # its file, under tests/e2e/


FLUX = Elsewhere("test_flux_helmrelease.py")
ARGOCD = Elsewhere("test_argocd.py")

REAL_LIQO = Elsewhere("test_real_liqo.py")  # liqoctl's peering user needs Liqo's own chart on the provider
DEMO = Elsewhere("test_demo.py")  # in a clone: the demo keeps its clusters' state in the checkout's .local/
CAPI = Elsewhere("test_capi_fleet.py")  # Cluster API's Clusters, with providers for them
# Day-to-day tasks on a peering: in an order that leaves each block what it acts on (a peering to delete).
WORKING = Elsewhere("test_docs_run.py")
WORKING_PAGE = "docs/guides/working-with-liqopeerings.md"

# Every block, by its page and the start of its first line: None runs it; Elsewhere names the test that runs
# it; a string says why it cannot run in the test environment. Each block matches one entry, and each entry
# one block.
BLOCKS: dict[tuple[str, str], str | Elsewhere | None] = {
    ("docs/installation.md", "make release REGISTRY=registry.example.com/platform VERSION=0.1.0"): None,
    ("docs/installation.md", "helm install liqo-peering-operator oci://registry.example.com/platform/"): None,
    ("docs/installation.md", "docker build -t registry.example.com/platform/liqo-peering-operator:dev ."): None,
    ("docs/installation.md", "helm install liqo-peering-operator deploy/helm/liqo-peering-operator "): None,
    ("docs/installation.md", "src=registry.example.com/platform"): None,
    ("README.md", "docker build -t registry.example.com/platform/liqo-peering-operator:dev ."): None,
    ("README.md", "helm install liqo-peering-operator deploy/helm/liqo-peering-operator "): None,
    (
        "docs/getting-started.md",
        "docker build -t registry.example.com/platform/liqo-peering-operator:dev .",
    ): None,
    ("docs/getting-started.md", "helm install liqo-peering-operator deploy/helm/liqo-peering-operator "): None,
    ("docs/getting-started.md", "kubectl -n liqo get configmap -l app.kubernetes.io/name=clusterid-configmap"): None,
    ("docs/getting-started.md", "liqoctl generate peering-user "): REAL_LIQO,
    ("docs/getting-started.md", "kubectl -n default create secret generic provider-kubeconfig "): None,
    ("docs/getting-started.md", "kubectl apply -f examples/basic.yaml"): None,
    ("docs/getting-started.md", "kubectl -n default wait --for=condition=Ready lp/provider"): None,
    ("docs/getting-started.md", "kubectl -n default describe lp provider"): None,
    ("docs/getting-started.md", "kubectl -n default delete lp provider"): None,
    ("docs/getting-started.md", "liqoctl delete peering-user "): REAL_LIQO,
    ("docs/getting-started.md", "make demo "): DEMO,
    ("docs/guides/flux.md", "kubectl -n flux-system create secret generic registry-ca "): FLUX,
    ("docs/guides/argocd.md", "kubectl -n argocd patch configmap argocd-cm "): ARGOCD,
    ("docs/guides/cluster-api.md", "helm upgrade liqo-peering-operator "): CAPI,
    ("docs/guides/cluster-api.md", "kubectl -n fleet label cluster "): CAPI,
    ("docs/guides/cluster-api.md", "kubectl apply -f examples/cluster-api-fleet.yaml"): CAPI,
    (WORKING_PAGE, "kubectl -n default wait --for=condition=Ready lp/provider --timeout=10m"): WORKING,
    (WORKING_PAGE, "kubectl -n default wait --for=condition=Ready lp --all"): (
        "a LiqoPeeringSet `edge` would peer with the one provider the test environment has, as the peering"
        " `provider` does: a duplicate; `kubectl wait` on a LiqoPeering runs in the block above"
    ),
    (WORKING_PAGE, "kubectl get lp -A -o wide"): WORKING,
    (WORKING_PAGE, "kubectl -n default get lp provider \\"): WORKING,
    (WORKING_PAGE, "kubectl -n default get events --field-selector"): WORKING,
    (WORKING_PAGE, "kubectl -n default create secret generic provider-kubeconfig \\"): WORKING,
    (
        WORKING_PAGE,
        'kubectl -n default patch lp provider --type=merge -p \'{"spec":{"remoteKubeconfigSecretRef"',
    ): WORKING,
    (WORKING_PAGE, "kubectl -n default annotate lp provider poked-at="): WORKING,
    (WORKING_PAGE, "kubectl -n default patch lp provider --type=merge \\"): WORKING,
    (WORKING_PAGE, "kubectl -n default delete lp provider --wait=false"): WORKING,
    (WORKING_PAGE, 'kubectl -n default patch lp provider --type=merge -p \'{"spec":{"deletion"'): WORKING,
    (WORKING_PAGE, "kubectl -n default annotate lp provider peering.liqo-operator.io/force-delete=true"): WORKING,
    (WORKING_PAGE, "kubectl annotate foreigncluster <provider-id>"): WORKING,
    (WORKING_PAGE, "kubectl -n default get lp provider -o jsonpath='{.metadata.generation}"): WORKING,
    (WORKING_PAGE, "kubectl -n liqo-peering get pods"): WORKING,
    (WORKING_PAGE, "kubectl -n default get lp provider -o yaml"): WORKING,
    (WORKING_PAGE, "kubectl -n liqo-peering logs deploy/liqo-peering-operator | grep default/provider"): WORKING,
}


@dataclass(frozen=True)
class Block:
    """One ```sh block: its page, the line of its opening fence, and its commands."""

    page: str
    line: int
    text: str

    @property
    def first(self) -> str:
        return self.text.splitlines()[0].strip()

    def entries(self) -> list[tuple[str, str]]:
        """The entries of BLOCKS that name this block."""
        return [(page, start) for page, start in BLOCKS if page == self.page and self.first.startswith(start)]

    @property
    def skipped(self) -> str | None:
        """Why tests/e2e/test_docs_run.py does not run the block (another test does, or none can); None if it
        runs it."""
        (entry,) = self.entries()
        how = BLOCKS[entry]
        return f"run by tests/e2e/{how.test}" if isinstance(how, Elsewhere) else how

    @property
    def elsewhere(self) -> Elsewhere | None:
        (entry,) = self.entries()
        how = BLOCKS[entry]
        return how if isinstance(how, Elsewhere) else None

    @property
    def installs_the_operator(self) -> bool:
        """Whether it installs the chart (the end-to-end test starts each such block from a consumer without it)."""
        return "helm install liqo-peering-operator " in self.text

    def commands(self, values: Mapping[str, str]) -> str:
        """The block with each placeholder of SUBSTITUTIONS replaced by its value in the test environment."""
        text = self.text
        for placeholder, replacement in SUBSTITUTIONS.items():
            if placeholder in text:
                text = text.replace(placeholder, replacement.format_map(values))
        return text


def section(text: str, heading: str | None) -> tuple[int, list[str]]:
    """The lines of the section under `heading` (to the next heading of its level or above), or of the whole
    text, with the number of the line before them."""
    lines = text.splitlines()
    if heading is None:
        return 0, lines
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level
        ),
        len(lines),
    )
    return start, lines[start:end]


def extract(text: str, page: str, heading: str | None = None) -> list[Block]:
    """The ```sh blocks of `text` (the section under `heading`, if given), in order. Other fences (yaml, console,
    toml) are not commands; a fence may be indented, in a list item."""
    offset, lines = section(text, heading)
    found: list[Block] = []
    fence: tuple[str, int] | None = None  # the opening fence's indent and line number
    body: list[str] = []
    for number, line in enumerate(lines, offset + 1):
        stripped = line.strip()
        if fence is None:
            if stripped == "```sh":
                fence, body = (line[: len(line) - len(line.lstrip())], number), []
        elif stripped == "```":
            indent, opened = fence
            found.append(Block(page, opened, "\n".join(b.removeprefix(indent) for b in body) + "\n"))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        raise ValueError(f"{page}:{fence[1]}: a ```sh block is never closed")
    return found


def blocks(page: str, root: Path = REPO) -> list[Block]:
    """The ```sh blocks of one of PAGES, from its section."""
    return extract((root / page).read_text(), page, PAGES[page])


def runs(page: str) -> bool:
    """Whether BLOCKS runs any block of the page."""
    return any(reason is None for (where, _), reason in BLOCKS.items() if where == page)


def all_blocks(root: Path = REPO) -> list[Block]:
    return [b for page in PAGES for b in blocks(page, root)]


def unlisted(found: list[Block]) -> list[str]:
    """The blocks that no entry of BLOCKS names, or more than one, as `page:line: first line`."""
    return [f"{b.page}:{b.line}: {b.first}" for b in found if len(b.entries()) != 1]


def stale(found: list[Block]) -> list[tuple[str, str]]:
    """The entries of BLOCKS that name no block of `found`, or more than one."""
    return [entry for entry in BLOCKS if sum(entry in b.entries() for b in found) != 1]


def block(page: str, start: str) -> Block:
    """The one block of ``page`` that BLOCKS' entry (page, start) names."""
    (found,) = [b for b in blocks(page) if (page, start) in b.entries()]
    return found


def run(found: Block, values: Mapping[str, str], kubeconfig: Path, tools: list[Path]) -> str:
    """Run a block against the cluster of ``kubeconfig``, the directories of ``tools`` (binaries) first on PATH
    (see ``shell``)."""
    path = os.pathsep.join([*(str(tool.parent) for tool in tools), os.environ.get("PATH", "")])
    return shell(found, values, {**os.environ, "PATH": path, "KUBECONFIG": str(kubeconfig)})


def shell(
    found: Block,
    values: Mapping[str, str],
    environ: Mapping[str, str],
    timeout: float = 300,
    diagnosis: Callable[[], str] = lambda: "",
    cwd: Path = REPO,
) -> str:
    """Run a block as a user's shell would (bash -e, pipefail, from the repository's root, or ``cwd``) in
    ``environ``; its output. A failure says what ran, what it printed, and ``diagnosis()``."""
    commands = found.commands(values)
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", commands],
        cwd=cwd, env=dict(environ), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"{found.page}:{found.line} failed (exit {proc.returncode}):\n{commands}\n"
        f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}\n{diagnosis()}"
    )
    return proc.stdout
