"""Run an access provider's exec plugin (a ClusterProfile's, clusterprofile.py) for a bearer token, within bounds.

The plugin is the administrator's (the provider file), never a kubeconfig Secret's: those stay refused
(kubeconfig.py). It is run as client-go runs one: the operator's environment with the provider's variables
added, ``KUBERNETES_EXEC_INFO`` holding the ExecCredential (with the cluster when provideClusterInfo is set),
no terminal. Unlike the Kubernetes Python client's own runner, it is bounded: a deadline (the process group
is killed), and at most so many bytes of output on each stream. Its token is never logged, and its standard
error is redacted before it goes into a message.

A token with an expirationTimestamp is used until shortly before then; one without, until the provider
answers 401 (``expire``), as client-go does. Then the plugin runs again on the next request.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from liqo_peering.clusterprofile import ExecConfig
from liqo_peering.errors import AccessProviderFailed, CloudIdentityFailed
from liqo_peering.redact import redact

TIMEOUT_SECONDS = 30.0
MAX_STDOUT_BYTES = 64 * 1024
MAX_STDERR_BYTES = 16 * 1024
MAX_TOKEN_BYTES = 16 * 1024
MAX_SHOWN = 300  # characters of the plugin's standard error shown in a message
# A token this close to its expiry is fetched again (client-go's exec authenticator has none; the Python
# client's has five minutes).
EXPIRY_MARGIN_SECONDS = 10.0
# A cloud's token is made again this long before it expires, or at half its life if that is shorter.
RENEW_BEFORE = timedelta(minutes=5)
# After a failure, the requests of the next seconds fail with it at once, instead of each running the plugin.
FAILURE_PAUSE_SECONDS = 5.0


def run_plugin(
    provider: str, config: ExecConfig, cluster: dict[str, Any] | None, timeout: float = TIMEOUT_SECONDS
) -> tuple[str, datetime | None]:
    """The token the plugin gives, and when it expires (None: until the provider refuses it)."""
    spec: dict[str, Any] = {"interactive": False}
    if config.provide_cluster_info and cluster is not None:
        spec["cluster"] = cluster
    info = {"apiVersion": config.api_version, "kind": "ExecCredential", "spec": spec}
    env = {**os.environ, **dict(config.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    what = f"the plugin of access provider {provider!r} ({os.path.basename(config.command)})"
    try:
        proc = subprocess.Popen(
            [config.command, *config.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, killed whole at the deadline
        )
    except OSError as exc:
        raise AccessProviderFailed(
            f"{what} could not be started ({exc.strerror or type(exc).__name__}); check the provider file's command"
            " and that the plugin is in the operator's Pod"
        ) from None
    try:
        out, err, over = _read_bounded(proc, timeout)
    finally:
        _kill(proc)
    stderr = redact(err.decode("utf-8", "replace").strip())[:MAX_SHOWN]
    said = f": {stderr}" if stderr else ""
    if over == "deadline":
        raise AccessProviderFailed(f"{what} did not finish within {timeout:g} s{said}; the operator retries")
    if over:
        raise AccessProviderFailed(f"{what} wrote more than {over}; the operator retries")
    if proc.returncode != 0:
        raise AccessProviderFailed(f"{what} failed (exit status {proc.returncode}){said}; the operator retries")
    return _credential(out, config.api_version, what)


def _read_bounded(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes, str]:
    """Standard output and error, and what cut them short: "deadline", a bound, or nothing."""
    assert proc.stdout is not None and proc.stderr is not None
    limits = {proc.stdout.fileno(): MAX_STDOUT_BYTES, proc.stderr.fileno(): MAX_STDERR_BYTES}
    names = {proc.stdout.fileno(): "standard output", proc.stderr.fileno(): "standard error"}
    got: dict[int, bytearray] = {fd: bytearray() for fd in limits}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in limits:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(got[proc.stdout.fileno()]), bytes(got[proc.stderr.fileno()]), "deadline"
            for key, _ in selector.select(left):
                fd = int(key.fd)
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    continue
                got[fd] += chunk
                if len(got[fd]) > limits[fd]:
                    return (
                        b"",
                        bytes(got[proc.stderr.fileno()])[:MAX_STDERR_BYTES],
                        f"{limits[fd]} bytes on {names[fd]}",
                    )
    try:
        proc.wait(max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        return b"", bytes(got[proc.stderr.fileno()]), "deadline"
    return bytes(got[proc.stdout.fileno()]), bytes(got[proc.stderr.fileno()]), ""


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The plugin's process group goes (a plugin that forked leaves nothing running), and its pipes close."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _credential(out: bytes, api_version: str, what: str) -> tuple[str, datetime | None]:
    """The token and its expiry in the plugin's ExecCredential; whatever is wrong is said without values."""
    try:
        doc = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise AccessProviderFailed(f"{what} did not write an ExecCredential in JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential" or doc.get("apiVersion") != api_version:
        raise AccessProviderFailed(f"{what} did not write an ExecCredential of {api_version}")
    status = doc.get("status")
    token = status.get("token") if isinstance(status, dict) else None
    if not isinstance(token, str) or not token or len(token.encode()) > MAX_TOKEN_BYTES:
        raise AccessProviderFailed(
            f"{what} gave no token (status.token; a client certificate is not taken from an access provider)"
        )
    expiry = status.get("expirationTimestamp") if isinstance(status, dict) else None
    if expiry is None:
        return token, None
    try:
        when = datetime.fromisoformat(str(expiry))
    except ValueError:
        raise AccessProviderFailed(f"{what} gave an expirationTimestamp that is not RFC 3339") from None
    return token, when if when.tzinfo is not None else when.replace(tzinfo=UTC)


Runner = Callable[[], tuple[str, "datetime | None"]]


def renewal(expires: datetime, now: datetime) -> datetime:
    """When to make the next token of one that expires then: RENEW_BEFORE ahead, or halfway to it if sooner."""
    return expires - min(RENEW_BEFORE, max(expires - now, timedelta(0)) / 2)


class ExecToken:
    """The token of one provider client, fetched again when it expires or is refused; thread-safe (the pass
    and the informers of the client share it)."""

    def __init__(self, run: Runner, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._run, self._now = run, now
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expiry: datetime | None = None
        self._failed: tuple[float, AccessProviderFailed | CloudIdentityFailed] | None = None
        self.runs = 0  # how many times the plugin ran

    def bearer(self) -> str:
        """``Bearer <token>``, running the plugin first when there is no usable token."""
        with self._lock:
            if self._token is not None and not self._expiring():
                return f"Bearer {self._token}"
            if self._failed is not None and time.monotonic() - self._failed[0] < FAILURE_PAUSE_SECONDS:
                raise self._failed[1]
            self.runs += 1
            try:
                self._token, self._expiry = self._run()
            except (AccessProviderFailed, CloudIdentityFailed) as exc:
                self._token, self._failed = None, (time.monotonic(), exc)
                raise
            self._failed = None
            return f"Bearer {self._token}"

    def expire(self) -> None:
        """The provider refused the token (401): the next request runs the plugin again."""
        with self._lock:
            self._token = None

    def _expiring(self) -> bool:
        return self._expiry is not None and (self._expiry - self._now()).total_seconds() < EXPIRY_MARGIN_SECONDS

    def hook(self, configuration: Any) -> None:
        """A Kubernetes client Configuration's refresh_api_key_hook: every request asks it for the header."""
        configuration.api_key["BearerToken"] = self.bearer()
