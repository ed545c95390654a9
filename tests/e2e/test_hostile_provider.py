"""A provider that answers what no API server sends, against real API servers, the stand-in and the
process-mode operator.

One LiqoPeering reaches the provider through a hostile proxy (testenv/hostile.py) that answers Liqo's
objects, per mode, with an 80 MiB answer, malformed JSON, JSON nested 200000 deep, a list of non-objects,
an answer that never ends, or a redirect to another loopback address; another reaches the provider
directly. Through every mode the direct one stays Ready, the hostile one reports the typed reason, the
operator neither exits nor restarts, logs no traceback and stays under 512 MiB of RSS, and the redirect's
target receives nothing. Once the proxy turns honest (and the direct peering is gone: two peerings of one
provider are duplicates), the hostile peering becomes Ready by itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testenv import procstat
from testenv.hostile import HostileProxy, Mode
from testenv.operator_support import SECRET, PeeringCase, wait_for

pytestmark = pytest.mark.standin  # beside main, on a stand-in pair of its own

DIRECT, HOSTILE = "direct", "hostile"
HOSTILE_SECRET = "hostile-kubeconfig"
MAX_RSS_MB = 512

# Each mode, the Ready reason it must give, and words of its message.
MODES = [
    (Mode.HUGE, "ProviderAnswerTooLarge", "the operator reads at most 64 MiB"),
    (Mode.MALFORMED, "ProviderAnswerInvalid", "not JSON"),
    (Mode.DEEP, "ProviderAnswerInvalid", "JSON nested too deep"),
    (Mode.WRONG_SHAPE, "ProviderAnswerInvalid", "where an object was expected"),
    (Mode.ENDLESS, "ProviderAnswerTooSlow", "no whole answer in time"),
    (Mode.REDIRECT, "ProviderAnswerInvalid", "which the operator never follows"),
]


def ready(case: PeeringCase, name: str) -> dict[str, Any] | None:
    cond = case.peerings.condition(case.namespace, name, "Ready")
    return cond if cond and cond.get("status") == "True" else None


def test_a_hostile_provider_is_reported_on_its_peering_only(case: PeeringCase, tmp_path: Path) -> None:
    env, ns = case.env, case.namespace
    operator = env.operator
    assert operator.proc is not None and operator.proc.poll() is None
    pid = operator.proc.pid
    log_start = len(operator.log())
    case.peerings.create(ns, DIRECT, {"remoteKubeconfigSecretRef": {"name": SECRET}})
    case.peerings.wait_status(ns, DIRECT, "ready", timeout=180)

    with HostileProxy(tmp_path, env.provider_kubeconfig()) as proxy:
        proxy.mode = MODES[0][0]
        case.peerings.put_kubeconfig_secret(ns, HOSTILE_SECRET, proxy.kubeconfig())
        case.peerings.create(ns, HOSTILE, {"remoteKubeconfigSecretRef": {"name": HOSTILE_SECRET}})
        peak = 0.0
        for mode, reason, said in MODES:
            proxy.mode = mode

            def reported(reason: str = reason, said: str = said) -> dict[str, Any] | None:
                cond = case.peerings.condition(ns, HOSTILE, "Ready")
                ok = cond and cond.get("reason") == reason and said in cond.get("message", "")
                return cond if ok else None

            cond = wait_for(f"{HOSTILE} Ready {reason} ({mode.value})", reported, timeout=120)
            print(f"{mode.value}: {cond['reason']}: {cond['message']}")  # the words a user reads
            assert cond["status"] == "False" and f"127.0.0.1:{proxy.port}" in cond["message"]
            assert len(cond["message"]) < 2048
            assert proxy.hostile_requests(mode) > 0
            assert case.peerings.status(ns, HOSTILE)["peerStatus"] == "error"
            assert ready(case, DIRECT), case.peerings.condition(ns, DIRECT, "Ready")  # the other carries on
            assert operator.proc.poll() is None and operator.proc.pid == pid  # never exited nor restarted
            peak = max(peak, procstat.sample(pid).rss_mb)
            assert peak < MAX_RSS_MB, f"operator RSS {peak:.0f} MiB in mode {mode.value}"
        assert proxy.redirect_target.connections == 0  # the redirect was never followed
        print(f"operator RSS, most seen between modes: {peak:.0f} MiB; VmHWM {procstat.sample(pid).peak_rss_mb:.0f}")

        # The proxy turns honest: with the direct peering gone (a duplicate of it otherwise), the hostile
        # one becomes Ready by itself, nothing done to it.
        case.peerings.delete(ns, DIRECT)
        case.peerings.wait_gone(ns, DIRECT, timeout=120)
        proxy.mode = Mode.HONEST
        case.peerings.wait_status(ns, HOSTILE, "ready", timeout=180)
        assert ready(case, HOSTILE)
        case.peerings.delete(ns, HOSTILE)  # unpeered through the proxy, while it is there
        case.peerings.wait_gone(ns, HOSTILE, timeout=120)

    assert operator.proc.poll() is None and operator.proc.pid == pid
    assert procstat.sample(pid).peak_rss_mb < MAX_RSS_MB
    assert "Traceback" not in operator.log()[log_start:]
