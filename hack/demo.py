"""The local demo: two clusters with a real node each, Liqo, the operator installed with Helm as a Pod, and
an example LiqoPeering until Ready.

DEMO_LIQO picks Liqo: `chart` (the default) is Liqo as users install it, `helm install liqo` of its own
chart with the images built here and real gateways, and the peering is examples/nodeport.yaml (no load
balancer here); `processes` is Liqo's controllers as processes with the data plane stood in, and
`standin` Liqo's objects with the lighter Liqo stand-in; both peer with examples/basic.yaml.

Run through `make demo` (hack/demo.sh, which builds the tools and the images first); `make demo-down`
stops everything. State lives in .local/.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import yaml

from testenv.helm import run_helm
from testenv.kube import Kube
from testenv.liqo_chart import LiqoChartPair, liqo_images
from testenv.liqo_env import install_liqo
from testenv.liqo_env.pytest_plugin import LIQO_SETTINGS
from testenv.liqo_real.pytest_plugin import NO_LIQO_PODS
from testenv.localk8s import LocalCluster
from testenv.localk8s.__main__ import down as clusters_down
from testenv.localk8s.__main__ import up as clusters_up
from testenv.localk8s.images import built_images
from testenv.operator_support import Peerings, api_client, wait_for

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = ROOT / ".local" / "clusters"
LIQO_REAL = ROOT / ".local" / "liqo-real"
LIQO_CHART = ROOT / ".local" / "liqo-chart"
STATE = ROOT / ".local" / "demo"
CHART = ROOT / "deploy" / "helm" / "liqo-peering-operator"
RELEASE, RELEASE_NS = "liqo-peering-operator", "liqo-peering"


def start_background(name: str, cmd: list[str]) -> None:
    log = (STATE / f"{name}.log").open("ab")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=ROOT)
    (STATE / f"{name}.pid").write_text(str(proc.pid))
    print(f"started {name} (pid {proc.pid}, log .local/demo/{name}.log)")


def stop_background() -> None:
    for pid_file in STATE.glob("*.pid"):
        try:
            pid = int(pid_file.read_text())
            os.killpg(pid, signal.SIGTERM)
            # liqo_real stops its clusters on SIGTERM: give it the time to.
            wait_for(f"{pid_file.stem} to stop", partial(_stopped, pid), timeout=60)
            print(f"stopped {pid_file.stem}")
        except (ProcessLookupError, ValueError):
            pass
        pid_file.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _stopped(pid: int) -> bool:
    return not _alive(pid)


def real_liqo_up() -> tuple[Path, Path]:
    """Two clusters running Liqo's real control plane (testenv/liqo_real), in the background."""
    start_background(
        "liqo-real",
        [sys.executable, "-m", "testenv.liqo_real", "--dir", str(LIQO_REAL), "--prefix", "demo", "--nodes", "1"],
    )
    log = STATE / "liqo-real.log"

    def started_lines() -> list[str] | None:
        text = log.read_text(errors="replace")
        return text.splitlines() if "ready; Ctrl-C" in text else None

    lines = wait_for("Liqo's control plane to come up (.local/demo/liqo-real.log)", started_lines, timeout=600)
    CLUSTERS.mkdir(parents=True, exist_ok=True)
    for line in lines:
        if line.startswith(("consumer: ", "provider: ")):
            side, rest = line.split(": ", 1)
            shutil.copyfile(rest.split(" (", 1)[0], CLUSTERS / f"{side}.kubeconfig")
    print("Liqo's real control plane runs on both clusters (its gateway pods are stood in)")
    return CLUSTERS / "consumer.kubeconfig", CLUSTERS / "provider.kubeconfig"


def chart_liqo_up() -> tuple[Path, Path]:
    """Two clusters with a node each and Liqo installed on both with its own Helm chart (testenv.liqo_chart);
    the clusters keep running when this process exits."""
    if LIQO_CHART.exists():
        clusters_down(LIQO_CHART)
    pair = LiqoChartPair.up(LIQO_CHART, liqo_images(), timeout=420)
    print(
        "Liqo installed with its Helm chart on both clusters: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in pair.timings.items())
    )
    CLUSTERS.mkdir(parents=True, exist_ok=True)
    for side, cluster in pair.clusters.items():
        shutil.copyfile(cluster.kubeconfig, CLUSTERS / f"{side}.kubeconfig")
    return CLUSTERS / "consumer.kubeconfig", CLUSTERS / "provider.kubeconfig"


def standin_liqo_up() -> tuple[Path, Path]:
    """Two clusters with Liqo's objects and the Liqo stand-in (lighter: no Liqo binaries needed)."""
    clusters_up(CLUSTERS, ["consumer", "provider"], nodes=1)
    consumer_kc, provider_kc = CLUSTERS / "consumer.kubeconfig", CLUSTERS / "provider.kubeconfig"
    for name, kubeconfig in (("consumer", consumer_kc), ("provider", provider_kc)):
        cluster_id, pod, external = LIQO_SETTINGS[name]
        install_liqo(Kube.from_kubeconfig(str(kubeconfig)), cluster_id, pod, external)
        print(f"installed Liqo's objects on {name} (cluster ID {cluster_id})")
    start_background(
        "liqo-standin",
        [
            sys.executable,
            "-m",
            "testenv.standin",
            "--consumer-kubeconfig",
            str(consumer_kc),
            "--provider-kubeconfig",
            str(provider_kc),
        ],
    )
    return consumer_kc, provider_kc


def install_operator(kubeconfig: Path, cluster_dir: Path, sets: list[str]) -> None:
    """The operator image (`make images`) into the consumer's node, then the chart, until its Pod is ready."""
    image = built_images()["operator"]
    LocalCluster.load(cluster_dir).load_image(image.archive)
    repository, tag = image.ref.rsplit(":", 1)
    # Loaded into the nodes just now: there is no registry to pull it from.
    values = [f"image.repository={repository}", f"image.tag={tag}", "image.pullPolicy=Never", *sets]
    args = ["upgrade", "--install", RELEASE, str(CHART), "--namespace", RELEASE_NS, "--create-namespace"]
    for value in values:
        args += ["--set", value]
    run_helm(*args, "--wait", "--timeout", "5m", kubeconfig=kubeconfig)
    print(f"installed the chart: the operator runs as a Pod ({image.ref}) in namespace {RELEASE_NS}")


def up(mode: str) -> None:
    started = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    stop_background()
    example = "basic.yaml"
    if mode == "chart":
        consumer_kc, provider_kc = chart_liqo_up()
        install_operator(consumer_kc, LIQO_CHART / "consumer", [])
        example = "nodeport.yaml"
    elif mode == "processes":
        consumer_kc, provider_kc = real_liqo_up()
        # The node is tainted against Liqo's own Pods (processes here); the operator's Pod tolerates that.
        toleration = [f"tolerations[0].{key}={value}" for key, value in NO_LIQO_PODS.items()]
        install_operator(consumer_kc, LIQO_REAL / "demo-consumer", [*toleration, "tolerations[0].operator=Exists"])
    else:
        consumer_kc, provider_kc = standin_liqo_up()
        install_operator(consumer_kc, CLUSTERS / "consumer", [])
    consumer = api_client(consumer_kc)
    peerings = Peerings(consumer)
    peerings.put_kubeconfig_secret("default", "provider-kubeconfig", provider_kc.read_bytes())
    doc = yaml.safe_load((ROOT / "examples" / example).read_text())
    if peerings.get("default", doc["metadata"]["name"]) is None:
        peerings.create("default", doc["metadata"]["name"], doc["spec"])
    print(f"applied examples/{example}; waiting for Ready ...")
    status = peerings.wait_status("default", doc["metadata"]["name"], "ready", timeout=420)
    print(f"LiqoPeering default/provider is ready ({time.monotonic() - started:.0f}s in all)\n")
    print(f"remote cluster {status['remoteClusterID']}, role {status['foreignCluster']['role']}")


def main() -> int:
    if sys.argv[1:] == ["down"]:
        stop_background()
        clusters_down(CLUSTERS)
        if LIQO_CHART.exists():
            clusters_down(LIQO_CHART)
        shutil.rmtree(LIQO_CHART, ignore_errors=True)
        shutil.rmtree(LIQO_REAL, ignore_errors=True)
        shutil.rmtree(STATE, ignore_errors=True)
        return 0
    mode = os.environ.get("DEMO_LIQO", "chart")
    if mode not in ("chart", "processes", "standin"):
        print(f"DEMO_LIQO={mode!r}: use chart (the default), processes or standin", file=sys.stderr)
        return 2
    up(mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
