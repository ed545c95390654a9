"""The faster tier (LIQO_INSTALL=processes, `make bench`'s first row) comes up: `make test` runs the realliqo
suite on Liqo's chart, so this keeps the process runner itself from rotting unseen."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from testenv import kube as k
from testenv.liqo_real.pytest_plugin import start_real_liqo_pair

pytestmark = [pytest.mark.e2e, pytest.mark.realliqo, pytest.mark.solo]  # a pair of its own


def test_the_process_pair_comes_up_with_every_component_running() -> None:
    pair = start_real_liqo_pair(Path(tempfile.mkdtemp(prefix="liqo-proc-")), prefix="pt")
    try:
        for side in ("consumer", "provider"):
            liqo = pair.liqo[side]
            assert liqo.runner is not None and liqo.dataplane is not None
            alive = {p.binary for p in liqo.runner.processes() if p.alive()}
            assert {"liqo-controller-manager", "crd-replicator", "ipam", "webhook"} <= alive, (side, alive)
            assert pair.kube(side).list(k.FOREIGNCLUSTER) == []  # nothing peered yet
        assert pair.ids == {"consumer": "rl-consumer-id", "provider": "rl-provider-id"}
        assert pair.virtual_kubelets() == 0  # none until a peering makes a VirtualNode
    finally:
        pair.stop()
