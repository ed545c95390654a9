"""kstatus (what Flux reads) on live LiqoPeerings: InProgress while establishing, Current when ready,
Failed when stalled. hack/kstatus-check runs sigs.k8s.io/cli-utils' status.Compute against the cluster."""

from __future__ import annotations

from pathlib import Path

from test_kstatus import kstatus

from testenv.operator_support import SECRET, PeeringCase, wait_for


def test_kstatus_follows_live_peerings(case: PeeringCase, kstatus_check: Path) -> None:
    ns = case.namespace
    kubeconfig = str(case.env.lc["consumer"].kubeconfig)

    def verdict(name: str) -> tuple[str, str] | None:
        return kstatus(kstatus_check, "--kubeconfig", kubeconfig, "--namespace", ns).get(f"{ns}/{name}")

    case.standin.set_faults("both", delay="8")  # keep it establishing long enough to look at
    case.peerings.create(ns, "provider", {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "5m"})
    case.peerings.wait_status(ns, "provider", "establishing", timeout=60)
    assert verdict("provider") is not None and verdict("provider")[0] == "InProgress"  # type: ignore[index]
    case.standin.set_faults("both", delay=None)
    case.peerings.wait_status(ns, "provider", "ready")
    assert wait_for("kstatus Current", lambda: verdict("provider") == ("Current", "Resource is Ready"), timeout=30)

    case.peerings.create(ns, "broken", {"remoteKubeconfigSecretRef": {"name": "missing"}})
    case.peerings.wait_reason(ns, "broken", "SecretNotFound")
    status, message = verdict("broken") or ("", "")
    assert status == "Failed" and "missing" in message
