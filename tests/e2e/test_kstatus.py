"""kstatus (the readiness model Flux, Helm's --wait and kpt use) agrees with LiqoPeering's status.

hack/kstatus-check computes sigs.k8s.io/cli-utils' status.Compute; here it reads the shared status
fixtures with --file. Live-cluster checks (--kubeconfig) build on the same binary.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "liqopeering-status"
SET_FIXTURES = REPO / "tests" / "fixtures" / "liqopeeringset-status"


def kstatus(binary: Path, *args: str) -> dict[str, tuple[str, str]]:
    """{"namespace/name": (status, message)} as printed by kstatus-check."""
    out = subprocess.run([str(binary), *args], check=True, capture_output=True, text=True, timeout=60)
    result: dict[str, tuple[str, str]] = {}
    for line in out.stdout.splitlines():
        key, _, rest = line.partition(": ")
        status, _, message = rest.partition(" ")
        result[key] = (status, message)
    return result


@pytest.mark.parametrize(
    ("fixture", "status", "message"),
    [
        ("ready", "Current", "Resource is Ready"),
        ("establishing", "InProgress", "Waiting for the gateway connection to be established"),
        ("no-peers", "InProgress", ""),
        ("timeout", "Failed", "Networking did not become ready within 5m: gateway connection still pending"),
        ("error", "Failed", "Secret default/provider-kubeconfig has no key kubeconfig: fix the Secret"),
        ("stale-generation", "InProgress", ""),
        ("deleting", "Terminating", "Resource scheduled for deletion"),
    ],
)
def test_fixture_status(kstatus_check: Path, fixture: str, status: str, message: str) -> None:
    path = FIXTURES / f"{fixture}.yaml"
    got = kstatus(kstatus_check, "--file", str(path))
    assert list(got) == [f"default/{yaml.safe_load(path.read_text())['metadata']['name']}"]
    got_status, got_message = next(iter(got.values()))
    assert got_status == status
    if message:
        assert got_message == message


@pytest.mark.parametrize(
    ("fixture", "status"),
    [
        ("ready", "Current"),
        ("progressing", "InProgress"),
        ("failed", "Failed"),
        ("stale-generation", "InProgress"),
        ("deleting", "Terminating"),
        ("no-status", "Current"),  # no status at all; the CRD's status default ({observedGeneration: 0}) prevents it
    ],
)
def test_set_fixture_status(kstatus_check: Path, fixture: str, status: str) -> None:
    """LiqoPeeringSet's conditions read by kstatus as its Argo CD health check reads them."""
    got = kstatus(kstatus_check, "--file", str(SET_FIXTURES / f"{fixture}.yaml"))
    assert [value[0] for value in got.values()] == [status]


def test_many_documents_and_lists(kstatus_check: Path, tmp_path: Path) -> None:
    """A multi-document file, and a List as `kubectl get -o yaml` prints it, are both read item by item."""
    docs = [(FIXTURES / f"{name}.yaml").read_text() for name in ("ready", "timeout")]
    multi = tmp_path / "multi.yaml"
    multi.write_text("\n---\n".join(docs))
    assert {k: v[0] for k, v in kstatus(kstatus_check, "--file", str(multi)).items()} == {
        "default/ready": "Current",
        "default/timeout": "Failed",
    }
    items = "".join("- " + doc.replace("\n", "\n  ").rstrip() + "\n" for doc in docs)
    as_list = tmp_path / "list.yaml"
    as_list.write_text("apiVersion: v1\nkind: List\nitems:\n" + items)
    assert {k: v[0] for k, v in kstatus(kstatus_check, "--file", str(as_list)).items()} == {
        "default/ready": "Current",
        "default/timeout": "Failed",
    }


def test_usage_error(kstatus_check: Path) -> None:
    proc = subprocess.run([str(kstatus_check)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--file or --kubeconfig" in proc.stderr
