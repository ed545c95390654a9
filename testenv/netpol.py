"""NetworkPolicies enforced on a node of a local cluster (testenv.localk8s): kube-router's network policy
controller alone (`--run-firewall`, no routing, no service proxy), in the node's network namespace.

It programs iptables (Debian's, the nftables backend) and ipsets in that namespace: Pods' traffic through
the node is matched in the filter table's FORWARD chain, bridged traffic between Pods of the node too (the
nodes set net.bridge.bridge-nf-call-iptables). kube-network-policies, which upstream Kubernetes tests with,
cannot run on the test hosts' kernels (docs/development/testing.md).

kube-router shares the node's filter table with the kubelet (its KUBE-FIREWALL and canary chains): `start`
saves the table, `stop` restores it and destroys the ipsets (the node has none of its own), so that a later
test finds the node as it was.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from testenv.localk8s import LocalCluster
from testenv.localk8s.network import NetworkError, in_netns, run
from testenv.localk8s.node import NodeSpec
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.spawned import Spawned
from testenv.wait import answers_ok, wait_for

HEALTH_PORT = 20244  # kube-router's default; in the node's namespace, so no other node's
# The names of kube-router's chains in the filter table.
CHAINS = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")


def build() -> Path:
    """kube-router, built by hack/build-netpol.sh (a no-op when cached)."""
    subprocess.run([str(REPO_ROOT / "hack" / "build-netpol.sh")], check=True, capture_output=True, timeout=1800)
    return tool_path("kube-router")


class PolicyEnforcer:
    """kube-router's network policy controller on the node `spec` of `cluster`, as the cluster's admin."""

    def __init__(self, cluster: LocalCluster, spec: NodeSpec, workdir: Path) -> None:
        self.cluster = cluster
        self.spec = spec
        self.log_path = workdir / f"kube-router-{spec.name}.log"
        self.proc: Spawned | None = None
        self.saved = ""  # the filter table before kube-router

    def start(self) -> PolicyEnforcer:
        # Only what this class made may be removed by `stop`: kube-router's chains or an ipset already there
        # are someone else's.
        left = self.leftovers()
        if left:
            raise NetworkError(f"{self.spec.name}: the node's namespace already has {left}")
        self.saved = self.rules()
        argv = [
            str(build()),
            f"--kubeconfig={self.cluster.kubeconfig}",
            f"--hostname-override={self.spec.name}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-cni=false",
            "--enable-ipv6=false",
            f"--service-cluster-ip-range={self.spec.service_cidr}",
            f"--health-port={HEALTH_PORT}",
            "--v=1",
        ]
        self.proc = Spawned("kube-router", in_netns(self.spec.netns, argv), self.log_path)
        wait_for(f"kube-router on {self.spec.name} to be healthy", self._healthy, timeout=60)
        return self

    def _healthy(self) -> bool:
        if self.proc is not None and not self.proc.alive():
            raise AssertionError(f"kube-router exited:\n{self.proc.tail()}")
        return answers_ok(f"http://{self.spec.ip}:{HEALTH_PORT}/healthz")

    def rules(self) -> str:
        """The node's filter table, as iptables-save prints it."""
        return run(["iptables-save", "-t", "filter"], self.spec.netns)

    def applies(self, namespace: str, pod: str, policy: str) -> bool:
        """Whether kube-router runs the Pod's traffic through the NetworkPolicy `policy` (every Pod of the node
        has a chain; one that no policy selects goes through kube-router's default, which allows all)."""
        lines = self.rules().splitlines()
        jump = f"rule to jump traffic destined to POD name:{pod} namespace: {namespace} to chain "
        chains = {line.split(jump, 1)[1].split('"', 1)[0] for line in lines if jump in line}
        return any(
            line.startswith(f"-A {chain} ") and f"run through nw policy {policy}" in line
            for chain in chains
            for line in lines
        )

    def forget_flows(self, pod_ip: str) -> None:
        """Drop the conntrack entries of the Pod's flows: kube-router lets established flows through, so a
        flow opened before a policy applied would bypass it; forgotten, its next packet meets the policy."""
        try:
            run(["conntrack", "-D", "-s", pod_ip], self.spec.netns)
        except NetworkError as exc:
            if "0 flow entries have been deleted" not in str(exc):  # conntrack's exit 1 when there were none
                raise

    def log(self) -> str:
        return self.proc.tail(5000) if self.proc is not None else ""

    def leftovers(self) -> list[str]:
        """What of kube-router the namespace holds: its chains and rules, and ipsets."""
        found = [line for line in self.rules().splitlines() if any(chain in line for chain in CHAINS)]
        found += [f"ipset {name}" for name in run(["ipset", "list", "-n"], self.spec.netns).split()]
        return found

    def stop(self) -> None:
        """Stop kube-router, put the filter table back as it was, then destroy the ipsets its rules used."""
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        if self.saved:
            run(["iptables-restore", "--table=filter"], self.spec.netns, stdin=self.saved)
        run(["ipset", "destroy"], self.spec.netns)
