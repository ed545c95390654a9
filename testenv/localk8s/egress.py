"""The API server's way into its cluster's network: an HTTP CONNECT proxy on a unix socket, run inside node
0's network namespace, named by the API server's EgressSelectorConfiguration for the `cluster` egress (what
Konnectivity does in clusters whose control plane sits outside the nodes' network).

The API server runs on the host, where no route leads to Service or Pod addresses (the host routes nothing
anywhere). Through this proxy it reaches what it dials in the cluster as a node does: admission webhooks and
aggregated APIs at their Service's ClusterIP (kube-proxy's rules in the node's namespace pick the endpoint),
kubelets (logs, exec, port-forward) at their LAN address.

Standalone (stdlib only), started by the cluster as `python egress.py SOCKET` under `nsenter --net=...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

MAX_HEADER = 16384


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
    try:
        head = await client_reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        client_writer.close()
        return
    request = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(request) != 3 or request[0] != "CONNECT":
        client_writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
        client_writer.close()
        return
    host, _, port = request[1].rpartition(":")
    try:
        upstream_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port)), timeout=10
        )
    except (OSError, ValueError, TimeoutError) as exc:
        print(f"CONNECT {request[1]}: {exc}", file=sys.stderr, flush=True)
        client_writer.write(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
        client_writer.close()
        return
    print(f"CONNECT {request[1]}", flush=True)
    client_writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await client_writer.drain()
    await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
    for writer in (client_writer, upstream_writer):
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def serve(socket_path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(socket_path)
    server = await asyncio.start_unix_server(_handle, path=socket_path, limit=MAX_HEADER)
    os.chmod(socket_path, 0o600)
    print(f"egress proxy listening on {socket_path}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: egress.py SOCKET")
    asyncio.run(serve(sys.argv[1]))


if __name__ == "__main__":
    main()
