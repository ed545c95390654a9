"""Whether a gateway's hostname resolves (liqo_peering.clients.dns)."""

from __future__ import annotations

import socket
import threading

import pytest

from liqo_peering.clients import dns


def test_an_address_is_not_looked_up() -> None:
    assert dns.unresolved("198.18.0.20") is None and dns.unresolved("2001:db8::1") is None


def test_a_name_that_resolves_and_one_that_does_not() -> None:
    assert dns.unresolved("localhost") is None
    # .invalid never resolves (RFC 6761).
    assert dns.unresolved("gateway.example.invalid") in ("does not resolve", "no DNS answer within 3s")


def test_a_resolver_that_does_not_answer_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    released = threading.Event()

    def hangs(*_: object) -> list[object]:
        released.wait(5)
        raise socket.gaierror("late")

    monkeypatch.setattr(dns.socket, "getaddrinfo", hangs)
    try:
        assert dns.unresolved("gateway.example.com", timeout=0.1) == "no DNS answer within 0.1s"
    finally:
        released.set()
