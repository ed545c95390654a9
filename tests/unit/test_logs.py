"""Every log line about a peering names it and its remote cluster ID, kopf's own lines included."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from liqo_peering import logs


class JsonLog:
    """The operator's JSON log as pytest captures it. start() it in the test itself: capsys's stream is
    only live during the test's call phase."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def start(self) -> None:
        logs.configure("json")

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.capsys.readouterr().err.splitlines() if line.strip()]


@pytest.fixture
def log(capsys: pytest.CaptureFixture[str]) -> Iterator[JsonLog]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    structlog.contextvars.clear_contextvars()
    yield JsonLog(capsys)
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def test_engine_lines_carry_the_peering_and_its_remote_cluster_id(log: JsonLog) -> None:
    log.start()
    logs.bind_peering("team-a", "to-provider", "provider-id")
    structlog.get_logger("liqo_peering").info("waiting for the gateway client")
    (line,) = log.lines()
    assert (line["peering"], line["remote_cluster_id"]) == ("team-a/to-provider", "provider-id")


def test_kopf_object_lines_carry_the_peering_and_its_remote_cluster_id(log: JsonLog) -> None:
    log.start()
    logs.bind_peering("team-a", "to-provider", "provider-id")
    logs.bind_peering("team-b", "other", "other-id")  # this thread's context is another peering now
    ref = {"namespace": "team-a", "name": "to-provider", "kind": "LiqoPeering"}
    # kopf's ObjectLogger passes the object's reference as the `k8s_ref` extra.
    logging.getLogger("kopf.objects").error("Handler 'unpeer' failed temporarily", extra={"k8s_ref": ref})
    logging.getLogger("kopf.objects").info("unknown peering", extra={"k8s_ref": {"namespace": "x", "name": "y"}})
    first, second = log.lines()
    assert (first["peering"], first["remote_cluster_id"]) == ("team-a/to-provider", "provider-id")
    assert second["peering"] == "x/y" and "remote_cluster_id" not in second


def test_a_peering_without_a_known_remote_drops_a_stale_one(log: JsonLog) -> None:
    log.start()
    logs.bind_peering("team-c", "first", "first-id")
    logs.bind_peering("team-c", "second")
    structlog.get_logger("liqo_peering").info("reading the kubeconfig Secret")
    (line,) = log.lines()
    assert line["peering"] == "team-c/second" and "remote_cluster_id" not in line


def test_a_traceback_is_in_the_json_line_and_scrubbed(log: JsonLog) -> None:
    """A crash logs its traceback (the JSON renderer drops exc_info unless it is formatted), credentials
    in the quoted exception message removed."""
    logs.configure("json", scrub=lambda text: text.replace("s3cr3t", "[REDACTED]"))
    try:
        raise RuntimeError("token s3cr3t refused")
    except RuntimeError:
        structlog.get_logger("t").exception("reconcile crashed; retrying")
    line = log.lines()[-1]
    assert "Traceback" in line["exception"] and "RuntimeError: token [REDACTED] refused" in line["exception"]
    assert "s3cr3t" not in json.dumps(line)
