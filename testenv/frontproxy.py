"""An authenticating proxy in front of a local cluster's API server, with a CA of its own: nginx (Debian's
nginx-light), as users put one in front of an API server that their peers reach another way.

nginx terminates TLS with its own serving certificate, asks for a client certificate signed by the cluster's
CA (the one Liqo's Identity carries), and passes the request on to the API server with the cluster's front
proxy client certificate, the user and group taken from the client certificate's CN and O in X-Remote-User
and X-Remote-Group (the API server's --requestheader-* flags, set by testenv.localk8s). Its access log
names the user of every request (when it ends).
"""

from __future__ import annotations

import shutil
import socket
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from testenv.localk8s import pki
from testenv.localk8s.cluster import LocalCluster
from testenv.localk8s.ports import free_port
from testenv.spawned import Spawned
from testenv.wait import wait_for

# The API server's serving certificate names it so (an IP is not checked as a host name by nginx).
UPSTREAM_NAME = "kubernetes"


def nginx() -> Path:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
    if found is None:
        raise AssertionError("nginx is missing: hack/apt-install.sh nginx-light installs it (make test does)")
    return Path(found)


@dataclass
class AuthenticatingProxy:
    cluster: LocalCluster
    dir: Path
    proc: Spawned | None = None
    port: int = field(default_factory=free_port)

    @property
    def address(self) -> str:
        return f"https://{self.cluster.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        return (self.dir / "proxy-ca.crt").read_bytes()

    def start(self) -> AuthenticatingProxy:
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        ca = pki.new_ca("authenticating proxy")
        (self.dir / "proxy-ca.crt").write_bytes(pki.cert_pem(ca.cert))
        pki.new_serving_cert(ca, "proxy", ["proxy"], [self.cluster.host]).write(
            self.dir / "proxy.crt", self.dir / "proxy.key"
        )
        upstream = urllib.parse.urlsplit(self.cluster.server).netloc
        conf = self.dir / "nginx.conf"
        conf.write_text(_config(self, upstream))
        argv = [str(nginx()), "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(conf)]
        self.proc = Spawned("nginx", argv, self.dir / "nginx.out")

        def listening() -> bool:
            assert self.proc is not None
            if not self.proc.alive():
                raise AssertionError(f"nginx exited: {self.proc.tail()}\n{(self.dir / 'error.log').read_text()}")
            try:
                socket.create_connection((self.cluster.host, self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for("nginx to listen", listening, timeout=30)
        return self

    def users(self) -> list[tuple[str, int]]:
        """(user, HTTP status) of each request so far, as the access log has them."""
        log = self.dir / "access.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [(user, int(status)) for user, status, *_ in (line.split(" ", 2) for line in lines if line)]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def _config(proxy: AuthenticatingProxy, upstream: str) -> str:
    d, cluster = proxy.dir, proxy.cluster
    temp = "\n".join(
        f"    {kind}_temp_path {d / 'tmp' / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""daemon off;
master_process off;
worker_processes 1;
pid {d / "nginx.pid"};
error_log {d / "error.log"} notice;
events {{ worker_connections 512; }}
http {{
{temp}
    map $ssl_client_s_dn $lpo_user {{ "~(^|,)CN=(?<cn>[^,]+)" $cn; default ""; }}
    map $ssl_client_s_dn $lpo_group {{ "~(^|,)O=(?<org>[^,]+)" $org; default ""; }}
    log_format users '$lpo_user $status $request_method $uri';
    access_log {d / "access.log"} users;
    server {{
        listen {cluster.host}:{proxy.port} ssl;
        ssl_certificate {d / "proxy.crt"};
        ssl_certificate_key {d / "proxy.key"};
        ssl_client_certificate {cluster.ca_cert};
        ssl_verify_client on;
        location / {{
            proxy_pass https://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Authorization "";
            proxy_set_header X-Remote-User $lpo_user;
            proxy_set_header X-Remote-Group $lpo_group;
            proxy_ssl_certificate {cluster.front_proxy_cert};
            proxy_ssl_certificate_key {cluster.front_proxy_key};
            proxy_ssl_trusted_certificate {cluster.ca_cert};
            proxy_ssl_verify on;
            proxy_ssl_name {UPSTREAM_NAME};
            proxy_buffering off;
            proxy_request_buffering off;
            # A request is logged when it ends: a watch quiet for 5 s is ended (its client watches again), so
            # that the log shows who is watching while they are.
            proxy_read_timeout 5s;
        }}
    }}
}}
"""
