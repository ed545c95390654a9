"""A Git server on loopback for the GitOps e2e tests: Git's smart HTTP protocol through `git http-backend`.

Flux's source-controller and Argo CD's repo server clone over HTTP (go-git and git both need the smart
protocol, which the dumb file listing cannot give). `GitServer` runs a ThreadingHTTPServer on 127.0.0.1 that
hands each request to `git http-backend` as a CGI program, serving the bare repositories under its root;
`GitServer.write_repo` commits a set of files to one (a fresh commit on `main` each call).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "e2e",
    "GIT_AUTHOR_EMAIL": "e2e@localhost",
    "GIT_COMMITTER_NAME": "e2e",
    "GIT_COMMITTER_EMAIL": "e2e@localhost",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **_GIT_ENV}
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def _read_chunked(rfile: Any) -> bytes:
    body = bytearray()
    while True:
        size = int(rfile.readline().split(b";", 1)[0].strip(), 16)
        if size == 0:
            rfile.readline()
            return bytes(body)
        body += rfile.read(size)
        rfile.readline()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        self.server.requests.append(f"{self.command} {self.path} -> " + (args[1] if len(args) > 1 else "?"))

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _cgi(self) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = _read_chunked(self.rfile)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            # Request bodies may be gzip-compressed (git does that): http-backend inflates them itself.
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=120)
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = proc.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if proc.returncode != 0 and status == 200:
            status, payload = 500, proc.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.requests: list[str] = []


class GitServer:
    """Bare repositories under a directory of its own, served read-only over smart HTTP on 127.0.0.1."""

    def __init__(self, root: Path | None = None) -> None:
        self._tmp = None if root else tempfile.mkdtemp(prefix="gitserver-")
        self.root = root or Path(self._tmp or "")
        self.root.mkdir(parents=True, exist_ok=True)
        self._server = _Server(self.root)
        self._thread = threading.Thread(target=self._server.serve_forever, name="gitserver", daemon=True)

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> GitServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[str]:
        """The requests served so far ("GET /x.git/info/refs?service=git-upload-pack -> 200")."""
        return list(self._server.requests)

    def url(self, repo: str) -> str:
        return f"http://127.0.0.1:{self.port}/{repo}.git"

    def write_repo(self, repo: str, files: Mapping[str, str | bytes], message: str = "update") -> str:
        """Replace the content of repository `repo` (created if new) with `files` in one commit on main;
        returns the commit's hash."""
        bare = self.root / f"{repo}.git"
        if not bare.exists():
            _git("init", "--quiet", "--bare", "--initial-branch=main", str(bare))
        with tempfile.TemporaryDirectory(prefix="gitwork-") as tmp:
            work = Path(tmp)
            _git("init", "--quiet", "--initial-branch=main", cwd=work)
            _git("remote", "add", "origin", str(bare), cwd=work)
            if _git("ls-remote", "--heads", "origin", "main", cwd=work):
                _git("fetch", "--quiet", "origin", "main", cwd=work)
                _git("reset", "--quiet", "--hard", "FETCH_HEAD", cwd=work)
                _git("rm", "-r", "--quiet", "--ignore-unmatch", ".", cwd=work)
            for name, content in files.items():
                path = work / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content.encode() if isinstance(content, str) else content)
            _git("add", "--all", cwd=work)
            _git("commit", "--quiet", "--allow-empty", "-m", message, cwd=work)
            _git("push", "--quiet", "origin", "HEAD:main", cwd=work)
            return _git("rev-parse", "HEAD", cwd=work)
