"""An OCI distribution registry on the LAN of local clusters with nodes, trusted by the nodes' containerd.

The registry (github.com/distribution/distribution, built by hack/build-tools.sh) runs on the host, listening
on the LAN's host address (where the API servers listen too, and where nodes and the host both reach it),
with TLS from a CA of its own made by `pki`. Each node's containerd reads `<node dir>/certs.d/<host>/hosts.toml`
(its CRI `config_path`), which names that CA: the way a user's nodes trust a private registry, so the kubelet
pulls from it as from any registry. Storage is a directory under the workdir, gone with it.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from pathlib import Path

import yaml

from testenv.spawned import Spawned
from testenv.wait import answers_ok

from . import pki
from .node import NodeSpec
from .ports import free_port
from .tools import tool_path


class RegistryError(RuntimeError):
    pass


class Registry:
    """One registry process: `host` is `<ip>:<port>`, `ca_cert` the CA file clients trust."""

    def __init__(self, workdir: Path, ip: str) -> None:
        self.workdir = workdir
        self.ip = ip
        self.port = free_port()
        self._proc: Spawned | None = None

    @property
    def host(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def ca_cert(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def cert_dir(self) -> Path:
        """A directory holding only the CA, as `buildah --cert-dir` and containers' certs.d read it."""
        return self.workdir / "certs"

    def start(self, timeout: float = 60.0) -> Registry:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = pki.new_ca("localk8s-registry-ca")
        self.ca_cert.write_bytes(ca.cert_pem)
        self.cert_dir.mkdir(exist_ok=True)
        (self.cert_dir / "ca.crt").write_bytes(ca.cert_pem)
        pki.new_serving_cert(ca, "registry", [], [self.ip]).write(self.workdir / "tls.crt", self.workdir / "tls.key")
        config = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": False}},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")}, "delete": {"enabled": True}},
            "http": {
                "addr": self.host,
                "tls": {"certificate": str(self.workdir / "tls.crt"), "key": str(self.workdir / "tls.key")},
            },
        }
        (self.workdir / "config.yml").write_text(yaml.safe_dump(config))
        argv = [str(tool_path("registry")), "serve", str(self.workdir / "config.yml")]
        self._proc = Spawned("registry", argv, self.workdir / "registry.log")
        deadline = time.monotonic() + timeout
        while not self._answers():
            if not self._proc.alive():
                raise RegistryError(f"the registry exited: {self._proc.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RegistryError(f"the registry did not answer on {self.host} within {timeout}s")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        return answers_ok(f"https://{self.host}/v2/", ssl.create_default_context(cafile=str(self.ca_cert)))

    def trust(self, nodes: Iterable[NodeSpec]) -> None:
        """Make each node's containerd pull from this registry over TLS with its CA (read at each pull)."""
        for node in nodes:
            hosts_dir = node.dir / "certs.d" / self.host
            hosts_dir.mkdir(parents=True, exist_ok=True)
            (hosts_dir / "ca.crt").write_bytes(self.ca_cert.read_bytes())
            (hosts_dir / "hosts.toml").write_text(hosts_toml(self.host, hosts_dir / "ca.crt"))

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None


def hosts_toml(host: str, ca: Path) -> str:
    """containerd's registry host configuration: pull and resolve from `host` over TLS, trusting `ca`."""
    return f"""server = "https://{host}"

[host."https://{host}"]
  capabilities = ["pull", "resolve"]
  ca = "{ca}"
"""
