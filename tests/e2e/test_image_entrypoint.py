"""The image's command, run as the image runs it: the Dockerfile's ENTRYPOINT + CMD (exec form).

There is no container engine here, so the command runs as a process: its first word resolved in the
venv's bin directory (the image puts /opt/venv/bin first on PATH), plus only what running outside a
cluster needs: --kubeconfig for a local cluster (in a pod: the in-cluster config) and free ports for the
metrics and health endpoints (in a pod: the defaults 8080 and 8081, free in its own network namespace).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from testenv.crashwatch import ProcessWatch
from testenv.localk8s import LocalCluster
from testenv.localk8s.ports import free_port
from testenv.operator_support import api_client, install_crd, wait_for

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
FAMILIES = {
    "liqo_peering_peerings": "gauge",
    "liqo_peering_time_to_ready_seconds": "histogram",
    "liqo_peering_reconcile_errors_total": "counter",
    "liqo_peering_stage_duration_seconds": "histogram",
}


def exec_form(instruction: str) -> list[str]:
    """The JSON array of the last ENTRYPOINT or CMD in the Dockerfile (the exec form, which the image uses)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = [m.group(1).strip() for m in re.finditer(rf"^\s*{instruction}\s+(.+)$", text, re.MULTILINE | re.IGNORECASE)]
    assert found, f"no {instruction} in the Dockerfile"
    words = json.loads(found[-1])
    assert isinstance(words, list) and all(isinstance(w, str) for w in words), f"{instruction} is not exec form"
    return words


def image_command() -> list[str]:
    entrypoint, cmd = exec_form("ENTRYPOINT"), exec_form("CMD")
    binary = Path(sys.executable).parent / entrypoint[0]
    assert binary.exists(), f"{entrypoint[0]} is not in the venv's bin ({binary.parent}): is the project installed?"
    return [str(binary), *entrypoint[1:], *cmd]


def http_get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")
    except OSError:
        return None  # not listening yet


# process, metrics port, health port, log, and its watch (testenv.crashwatch)
ImageProcess = tuple[subprocess.Popen[bytes], int, int, Path, ProcessWatch]


def metric_types(text: str) -> dict[str, str]:
    """Family name -> type, from the exposition's `# TYPE` lines (families without samples included)."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE)}


@pytest.fixture
def image_process(local_clusters: dict[str, LocalCluster], tmp_path: Path) -> Iterator[ImageProcess]:
    # The provider cluster: the CRD is there (as on any cluster the chart is installed on) but no LiqoPeering
    # is, so this extra operator cannot interfere with the consumer's peerings and the session's operator.
    cluster = local_clusters["provider"]
    api = api_client(cluster.kubeconfig)
    install_crd(api)
    api.close()
    metrics_port, health_port = free_port(), free_port()
    argv = [
        *image_command(),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
    ]
    log_path = tmp_path / "image-command.log"
    watch = ProcessWatch("the image's command", log_path)  # a crash is a failure (testenv.crashwatch)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    watch.started(proc)
    try:
        yield proc, metrics_port, health_port, log_path, watch
    finally:
        if proc.poll() is None:
            watch.stopping(proc, signal.SIGKILL)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        sys.stderr.write(f"\n--- image command log: {log_path}\n")


def test_dockerfile_command_is_the_run_subcommand() -> None:
    command = image_command()
    assert Path(command[0]).name == "liqo-peering-operator"
    assert command[1:] == ["run"]


def test_image_command_serves_liveness_and_metrics_and_stops_cleanly(
    image_process: ImageProcess,
) -> None:
    proc, metrics_port, health_port, log_path, watch = image_process

    def answered(url: str) -> tuple[int, str] | None:
        assert proc.poll() is None, f"the image command exited ({proc.returncode}):\n{log_path.read_text()}"
        return http_get(url)

    # Before the event loop's first tick /healthz answers 503 (the startupProbe covers that time): wait for live.
    last: list[tuple[int, str] | None] = [None]

    def live() -> bool:
        last[0] = answered(f"http://127.0.0.1:{health_port}/healthz")
        return last[0] is not None and last[0][0] == 200

    try:
        wait_for("/healthz to answer 200", live, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer: {last[0]!r}\n{log_path.read_text()[-4000:]}") from None

    status, text = wait_for("/metrics to answer", lambda: answered(f"http://127.0.0.1:{metrics_port}/metrics"))
    assert status == 200
    types = metric_types(text)
    assert {name: types.get(name) for name in FAMILIES} == FAMILIES, text

    # SIGTERM, as the kubelet stops a container: the operator shuts down on its own, successfully.
    watch.stopping(proc, signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after SIGTERM:\n{log_path.read_text()[-4000:]}") from None
    log = log_path.read_text()
    assert code == 0, f"exit code {code}:\n{log[-4000:]}"
    assert "Traceback" not in log, log[-4000:]
