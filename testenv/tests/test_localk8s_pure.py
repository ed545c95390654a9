"""Pure parts of the localk8s harness: versions file, tool paths, certificates, ports, kubeconfigs."""

from __future__ import annotations

import base64
import ipaddress
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testenv.localk8s import cluster as cluster_module
from testenv.localk8s import network, pki, ports
from testenv.localk8s.cluster import LocalCluster, kubeconfig_dict
from testenv.localk8s.ports import free_port, is_listening
from testenv.localk8s.tools import REPO_ROOT, TOOLS, ToolMissingError, parse_versions, read_versions, tool_path


def test_parse_versions_handles_comments_quotes_and_export() -> None:
    text = "# pinned\nKUBERNETES_VERSION=1.35.0\n\nexport HELM_VERSION='3.19.0'  # helm\nETCD_VERSION=\"3.6.5\"\n"
    assert parse_versions(text) == {"KUBERNETES_VERSION": "1.35.0", "HELM_VERSION": "3.19.0", "ETCD_VERSION": "3.6.5"}


def test_parse_versions_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        parse_versions("not a key value line")


def test_repo_versions_file_has_every_tool() -> None:
    versions = read_versions()
    for key in ("KUBERNETES_VERSION", "ETCD_VERSION", "HELM_VERSION"):
        assert versions[key].count(".") == 2, key


def test_tool_path_uses_cache_dir_and_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LPO_CACHE_DIR", str(tmp_path))
    versions = {"KUBERNETES_VERSION": "1.2.3", "ETCD_VERSION": "3.4.5", "HELM_VERSION": "9.9.9"}
    with pytest.raises(ToolMissingError, match="make tools"):
        tool_path("helm", versions)
    binary = tmp_path / "tools" / "kubernetes-1.2.3" / "kube-apiserver"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert tool_path("kube-apiserver", versions) == binary
    with pytest.raises(ValueError, match="unknown tool"):
        tool_path("kubeadm", versions)


def _verify_signed_by(cert: x509.Certificate, ca: x509.Certificate) -> None:
    cert.verify_directly_issued_by(ca)  # raises if the issuer or the signature does not match


def test_ca_and_leaf_certificates() -> None:
    ca = pki.new_ca("test-ca")
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    serving = pki.new_serving_cert(ca, "kube-apiserver", ["localhost"], ["127.0.0.1", "10.96.0.1"])
    _verify_signed_by(serving.cert, ca.cert)
    san = serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.96.0.1"),
    ]
    eku = serving.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]

    client = pki.new_client_cert(ca, "alice", ["devs", "ops"])
    _verify_signed_by(client.cert, ca.cert)
    # The API server maps CN to the user name and every O to a group.
    assert client.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert [a.value for a in client.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "devs",
        "ops",
    ]
    eku = client.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_ca_round_trips_through_files(tmp_path: Path) -> None:
    ca = pki.new_ca("round-trip")
    ca.write(tmp_path / "ca.crt", tmp_path / "ca.key")
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600
    loaded = pki.load_ca(tmp_path / "ca.crt", tmp_path / "ca.key")
    assert loaded.cert == ca.cert
    _verify_signed_by(pki.new_client_cert(loaded, "x").cert, ca.cert)


def test_free_ports_are_distinct_and_bindable() -> None:
    got = [free_port() for _ in range(20)]
    assert len(set(got)) == len(got)
    with socket.socket() as s:
        s.bind(("127.0.0.1", got[0]))
        s.listen()
        assert is_listening(got[0])
    assert not is_listening(got[1])


def test_each_block_hands_out_its_own_ports_below_the_ephemeral_and_nodeport_ranges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[set[int]] = []
    for index in range(3):
        monkeypatch.setattr(ports, "_block", ports._block)
        ports.use_block(index, 3)
        low, high = ports._block
        got = {free_port() for _ in range(10)}
        assert all(low <= p < high <= 30000 for p in got), (index, got)
        handed.append(got)
    assert not handed[0] & handed[1] and not handed[1] & handed[2]


def test_kubeconfig_is_self_contained() -> None:
    cfg = kubeconfig_dict("c1", "https://127.0.0.1:1234", b"CA", "admin", b"CERT", b"KEY")
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    assert cluster == {
        "server": "https://127.0.0.1:1234",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
    }
    assert base64.b64decode(user["client-certificate-data"]) == b"CERT"
    assert base64.b64decode(user["client-key-data"]) == b"KEY"
    assert cfg["current-context"] == "c1"


def test_cluster_names_must_be_dns_labels(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DNS label"):
        LocalCluster("Not_Valid", tmp_path / "x")
    cluster = LocalCluster("consumer", tmp_path / "consumer")
    assert cluster.server == f"https://127.0.0.1:{cluster.apiserver_port}"
    assert cluster.kubeconfig == tmp_path.resolve() / "consumer" / "admin.kubeconfig"
    assert not cluster.is_running()


def test_tool_path_script_agrees_with_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LPO_CACHE_DIR", str(tmp_path))
    script = REPO_ROOT / "hack" / "tool-path.sh"
    missing = subprocess.run([script, "helm"], capture_output=True, text=True, check=False)
    assert missing.returncode == 1
    assert "make tools" in missing.stderr
    for name in TOOLS:
        with pytest.raises(ToolMissingError):
            tool_path(name)
        prefix, key = TOOLS[name]
        binary = tmp_path / "tools" / f"{prefix}-{read_versions()[key]}" / name
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("")
        binary.chmod(0o755)
        out = subprocess.run([script, name], capture_output=True, text=True, check=True).stdout.strip()
        assert Path(out) == tool_path(name) == binary


@pytest.mark.parametrize(("deadline", "restarted"), [(10.0, False), (-1.0, True)])
def test_an_api_server_down_past_the_lease_deadline_restarts_the_controller_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deadline: float, restarted: bool
) -> None:
    """As a leader-elected controller manager exits when it cannot renew its lease: one that lived through a
    long outage kept its garbage collector's informers in client-go's backoff for up to a minute more."""
    cluster = LocalCluster("provider", tmp_path / "provider")
    cluster.pid_dir.mkdir(parents=True)
    cluster.log_dir.mkdir(parents=True)
    for process in ("kube-apiserver", "kube-controller-manager"):
        cluster._spawn(process, ["sleep", "60"])  # stand-ins: only their pids matter here
    monkeypatch.setattr(cluster, "_wait", lambda *args: None)  # no /readyz to wait for
    monkeypatch.setattr(cluster, "api_client", lambda: type("Client", (), {"close": lambda self: None})())
    monkeypatch.setattr(cluster_module, "KCM_RENEW_DEADLINE_SECONDS", deadline)  # down longer than it, or not
    manager = cluster._procs["kube-controller-manager"]
    try:
        cluster.stop_process("kube-apiserver", graceful=False)
        cluster.start_process("kube-apiserver")
        assert (cluster._procs["kube-controller-manager"] is not manager) == restarted
        assert (manager.poll() is not None) == restarted
    finally:
        for proc in (*cluster._procs.values(), manager):
            proc.kill()
            proc.wait()


def test_cgroup_roots_of_nodes_starting_together_share_the_top_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpuset = tmp_path / "cpuset"
    cpuset.mkdir()
    (cpuset / "cpuset.cpus").write_text("0-1\n")
    (cpuset / "cpuset.mems").write_text("0\n")
    monkeypatch.setattr(network, "cgroup_hierarchies", lambda: [cpuset])
    real_mkdir = Path.mkdir

    def mkdir(self: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        # A real cgroup directory comes with its (empty) cpuset files.
        real_mkdir(self, mode, parents, exist_ok)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not (self / name).exists():
                (self / name).write_text("")

    monkeypatch.setattr(Path, "mkdir", mkdir)
    (cpuset / "localk8s").mkdir()  # another node made the top level and had not yet filled its cpuset

    network.make_cgroup_root("localk8s/br-a-0")
    network.make_cgroup_root("localk8s/br-b-0")

    for path in (cpuset / "localk8s", cpuset / "localk8s/br-a-0", cpuset / "localk8s/br-b-0"):
        assert (path / "cpuset.cpus").read_text() == "0-1\n", path
        assert (path / "cpuset.mems").read_text() == "0\n", path


def test_a_cluster_without_nodes_on_a_lan_listens_there(tmp_path: Path) -> None:
    # A provider without nodes beside a consumer with nodes: the consumer's Pods reach its API server.
    lan = network.Lan(index=7)
    beside = LocalCluster("provider", tmp_path / "provider", nodes=0, lan=lan, index=1)
    assert beside.host == lan.host_ip and beside.server.startswith(f"https://{lan.host_ip}:")
    assert beside.node_specs() == []
    assert LocalCluster("alone", tmp_path / "alone").host == "127.0.0.1"
