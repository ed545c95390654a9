"""An access provider's plugin run within bounds (liqo_peering/clients/execplugin.py): what it is told
(KUBERNETES_EXEC_INFO), what it may answer, how a failure reads (its standard error redacted), and when the
token is fetched again (expiry, a 401)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from liqo_peering.clients import execplugin
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import exec_token, to_api_client
from liqo_peering.clusterprofile import ExecConfig
from liqo_peering.errors import AccessProviderFailed, Unauthorized
from liqo_peering.kubeconfig import RemoteKubeconfig
from testenv.wait import wait_for

V1 = "client.authentication.k8s.io/v1"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6eCJ9.c2lnbmF0dXJlc2lnbmF0dXJl"


def plugin(tmp_path: Path, body: str, **config: Any) -> Callable[..., tuple[str, datetime | None]]:
    """A plugin written in Python: ``body`` runs with ``info`` (the ExecCredential it was given) and ``answer``."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys, time\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "def answer(status, api=info['apiVersion']):\n"
        "    print(json.dumps({'apiVersion': api, 'kind': 'ExecCredential', 'status': status}))\n" + body
    )
    exec_config = ExecConfig(V1, sys.executable, (str(script),), tuple(config.pop("env", ())), True)

    def run(cluster: dict[str, Any] | None = None, timeout: float = execplugin.TIMEOUT_SECONDS) -> Any:
        return execplugin.run_plugin("secretreader", exec_config, cluster, timeout)

    return run


def test_the_plugin_gets_its_cluster_and_the_providers_env_and_gives_a_token(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    run = plugin(
        tmp_path,
        f"open({str(seen)!r}, 'w').write(json.dumps([info, os.environ['REGION']]))\nanswer({{'token': {TOKEN!r}}})\n",
        env=[("REGION", "eu")],
    )
    cluster = {"server": "https://p:6443", "config": {"clusterName": "edge-1"}}
    assert run(cluster) == (TOKEN, None)
    info, region = json.loads(seen.read_text())
    assert info == {"apiVersion": V1, "kind": "ExecCredential", "spec": {"interactive": False, "cluster": cluster}}
    assert region == "eu"


def test_an_expiry_is_read(tmp_path: Path) -> None:
    run = plugin(tmp_path, "answer({'token': 't', 'expirationTimestamp': '2030-01-02T03:04:05Z'})\n")
    assert run() == ("t", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            f"sys.stderr.write('cannot read Secret: token: {TOKEN}'); sys.exit(3)\n",
            r"failed \(exit status 3\): cannot read Secret: token: \[REDACTED\]",
        ),
        ("print('not json')\n", "ExecCredential in JSON"),
        ("answer({'token': 't'}, api='client.authentication.k8s.io/v1beta1')\n", "ExecCredential of"),
        ("answer({'clientCertificateData': 'x', 'clientKeyData': 'y'})\n", "gave no token"),
        ("answer({'token': 'x' * 20000})\n", "gave no token"),
        ("answer({'token': 't', 'expirationTimestamp': 'tomorrow'})\n", "RFC 3339"),
        ("sys.stdout.write('x' * 200000)\n", "more than 65536 bytes on standard output"),
        ("sys.stderr.write('x' * 200000); sys.exit(1)\n", "more than 16384 bytes on standard error"),
    ],
)
def test_a_failing_plugin_is_access_provider_failed_and_its_secrets_stay_out(
    tmp_path: Path, body: str, says: str
) -> None:
    with pytest.raises(AccessProviderFailed, match=says) as err:
        plugin(tmp_path, body)()
    assert TOKEN not in err.value.message and len(err.value.message) < 1000
    assert "access provider 'secretreader'" in err.value.message


def test_a_plugin_past_its_deadline_is_killed_with_what_it_forked(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    body = (
        "import subprocess\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "sys.stderr.write('waiting'); sys.stderr.flush(); time.sleep(600)\n"
    )
    with pytest.raises(AccessProviderFailed, match=r"did not finish within 1 s: waiting"):
        plugin(tmp_path, body)(timeout=1.0)
    status = Path(f"/proc/{int(pid_file.read_text())}/stat")

    def gone() -> bool:  # or a zombie, until init reaps it: SIGKILL is delivered, not awaited
        try:
            return status.read_text().split()[2] == "Z"
        except FileNotFoundError:
            return True

    wait_for("the plugin's child to be killed with it", gone, timeout=10, interval=0.05)


def test_a_missing_command_says_so() -> None:
    config = ExecConfig(V1, "/nonexistent/plugin")
    with pytest.raises(AccessProviderFailed, match="could not be started"):
        execplugin.run_plugin("secretreader", config, None)


class Plugin:
    """Plays a plugin for ExecToken: the tokens it gives, one per run, and failures."""

    def __init__(self, *answers: tuple[str, datetime | None] | AccessProviderFailed) -> None:
        self.answers = list(answers)

    def __call__(self) -> tuple[str, datetime | None]:
        answer = self.answers.pop(0)
        if isinstance(answer, AccessProviderFailed):
            raise answer
        return answer


NOW = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_token_without_expiry_is_used_until_refused() -> None:
    token = execplugin.ExecToken(Plugin(("a", None), ("b", None)), now=lambda: NOW)
    assert token.bearer() == token.bearer() == "Bearer a" and token.runs == 1
    token.expire()  # a 401
    assert token.bearer() == "Bearer b" and token.runs == 2


def test_a_token_is_fetched_again_before_it_expires() -> None:
    clock = [NOW]
    token = execplugin.ExecToken(Plugin(("a", NOW + timedelta(minutes=5)), ("b", None)), now=lambda: clock[0])
    assert token.bearer() == "Bearer a"
    clock[0] = NOW + timedelta(minutes=5) - timedelta(seconds=execplugin.EXPIRY_MARGIN_SECONDS - 1)
    assert token.bearer() == "Bearer b" and token.runs == 2


def test_a_failure_is_not_run_again_at_once_for_every_request() -> None:
    failed = AccessProviderFailed("the plugin failed")
    token = execplugin.ExecToken(Plugin(failed, ("a", None)))
    for _ in range(3):
        with pytest.raises(AccessProviderFailed):
            token.bearer()
    assert token.runs == 1


def test_the_client_asks_the_token_for_every_request_and_a_401_fetches_it_again(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    run = plugin(
        tmp_path,
        f"n = int(open({str(counter)!r}).read() or 0) + 1 if os.path.exists({str(counter)!r}) else 1\n"
        f"open({str(counter)!r}, 'w').write(str(n))\nanswer({{'token': f'token-{{n}}'}})\n",
    )
    del run
    script = tmp_path / "plugin.py"
    remote = RemoteKubeconfig(
        config={
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [
                {"name": "u", "user": {"exec": {"apiVersion": V1, "command": sys.executable, "args": [str(script)]}}}
            ],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        },
        server="https://127.0.0.1:1",
        context_name="c",
        access_provider="secretreader",
    )
    token = exec_token(remote)
    assert token is not None
    api = to_api_client(remote, token)  # the first token, fetched while connecting
    assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
    assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer token-1"
    client = ClusterClient(api, "provider", remote.server, on_unauthorized=token.expire)
    refused = client._translate("GET", "/api/v1/namespaces", 401, "Unauthorized", "")
    assert isinstance(refused, Unauthorized)
    assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer token-2"
    # The kubeconfig's exec user is the operator's to run: the Kubernetes client never sees it.
    assert remote.config["users"][0]["user"]["exec"]["command"] == sys.executable
    client.close()
