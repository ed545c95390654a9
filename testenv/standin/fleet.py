"""Liqo for many light providers peered with one consumer: testenv's stand-in, one per provider, several
per process (`python -m testenv.standin.fleet`; the scale benchmark and the LiqoPeeringSet e2e test).

The stand-in is written for one consumer and one provider, and on the consumer it acts on every object.
Here each instance sees only its own provider's objects there (Liqo labels them all with
liqo.io/remote-cluster-id, so the consumer lists select by it), and one set of consumer watches per process
wakes only the instance an event concerns. Light providers (testenv.lightk8s) run no kube-controller-manager,
so this also does its two jobs there: signing the Tenants' CSRs with the providers' CA, and (instead of
waiting for Pods that never come) marking the gateway Deployments ready at once.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from testenv import kube as k
from testenv.kube import Kube, Obj
from testenv.localk8s import pki
from testenv.standin.standin import GW_POD, REMOTE, SNAPSHOT, WATCHED, Side, StandIn, labels

USER_AGENT = "bench-standin"  # its writes in the audit logs (bench.scale counts them)
log = logging.getLogger("testenv.standin.fleet")


def sign_approved_csrs(kc: Kube, ca: pki.CertKey) -> None:
    """What kube-controller-manager's signer does for kubernetes.io/kube-apiserver-client: a client
    certificate for the approved request's subject and key, issued by the cluster CA."""
    for csr in kc.list(k.CSR):
        status = csr.setdefault("status", {})
        approved = any(c.get("type") == "Approved" for c in status.get("conditions") or [])
        if status.get("certificate") or not approved:
            continue
        request = x509.load_pem_x509_csr(k.unb64(csr["spec"]["request"]))
        now = datetime.now(UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(ca.cert.subject)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca.key, hashes.SHA256())
        )
        status["certificate"] = k.b64(cert.public_bytes(serialization.Encoding.PEM))
        kc.replace(k.CSR, csr, sub="status")


class ProviderStandIn(StandIn):
    """The stand-in for one of many providers of a shared consumer."""

    def __init__(
        self, consumer: Kube, provider: Kube, consumer_id: str, provider_id: str, ca: pki.CertKey, resync: float
    ) -> None:
        super().__init__(consumer, provider, "liqo", resync)
        self.consumer_id = consumer_id
        self.provider_id = provider_id
        self.ca = ca

    def start(self) -> None:
        """Watches on the provider only; the process's ConsumerWatches wake it for the consumer."""
        provider = self.sides[1]
        self._stop.clear()
        for res, selector in WATCHED:
            t = threading.Thread(
                target=self._watch, args=(provider, res, selector), daemon=True, name=f"watch-{res.plural}"
            )
            t.start()
            self._threads.append(t)
        loop = threading.Thread(target=self.run, daemon=True, name="standin-loop")  # the name stop() joins
        loop.start()
        self._threads.append(loop)

    def wake(self) -> None:
        self._wake.set()

    def _load(self, side: Side) -> None:
        if side is self.sides[1]:
            super()._load(side)
            return
        mine = f"{REMOTE}={self.provider_id}"
        try:
            side.cluster_id = self.consumer_id
            side.faults = {}
            side.snap = {
                name: side.kube.list(res, selector=f"{sel},{mine}" if sel else mine)
                for name, (res, sel) in SNAPSHOT.items()
            }
        except Exception as e:
            log.warning("cannot read the consumer: %s", e)
            side.cluster_id = None

    def _make_ready(self, side: Side, dep: Obj) -> None:
        if side is self.sides[1]:
            # No controller manager on a light provider, so no Pods will come: skip the base's 5 s wait
            # for them (it writes the Deployment's status itself once the Deployment looks that old).
            dep = {**dep, "metadata": {**dep["metadata"], "creationTimestamp": "1970-01-01T00:00:00Z"}}
        super()._make_ready(side, dep)

    def _issue_certificate(self, side: Side, consumer_id: str, ns: str, csr_pem: bytes) -> bytes | None:
        cert = super()._issue_certificate(side, consumer_id, ns, csr_pem)
        if cert is None and side is self.sides[1]:
            sign_approved_csrs(side.kube, self.ca)
            cert = super()._issue_certificate(side, consumer_id, ns, csr_pem)
        return cert


class ConsumerWatches:
    """One watch per kind on the consumer for all the stand-ins of this process; an event wakes the stand-in
    of the provider it concerns (by Liqo's label, or the gateway name on gateway Pods), or all of them."""

    def __init__(self, consumer: Kube, standins: dict[str, ProviderStandIn]) -> None:
        self.consumer = consumer
        self.standins = standins
        self._stop = threading.Event()

    def start(self) -> None:
        for res, selector in WATCHED:
            threading.Thread(target=self._run, args=(res, selector), daemon=True, name=f"consumer-{res.plural}").start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self, res: k.Res, selector: str | None) -> None:
        while not self._stop.is_set():
            try:
                for event in self.consumer.watch(res, selector, timeout=300):
                    lbl = labels(event.get("object") or {})
                    target = lbl.get(REMOTE) or lbl.get(GW_POD)
                    if target is None:
                        for standin in self.standins.values():
                            standin.wake()
                    elif target in self.standins:
                        self.standins[target].wake()
                    if self._stop.is_set():
                        return
            except Exception as e:
                log.debug("consumer watch %s: %s", res.plural, e)
                self._stop.wait(2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testenv.standin.fleet", description=__doc__)
    p.add_argument("--consumer-kubeconfig", required=True)
    p.add_argument("--consumer-id", required=True)
    p.add_argument("--ca-dir", type=Path, required=True, help="the providers' CA (ca.crt, ca.key)")
    p.add_argument("--provider", action="append", default=[], help="KUBECONFIG=CLUSTER_ID, repeatable")
    p.add_argument("--resync", type=float, default=30.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # "pool is full" from the watch threads
    ca = pki.load_ca(args.ca_dir / "ca.crt", args.ca_dir / "ca.key")
    standins: dict[str, ProviderStandIn] = {}
    for spec in args.provider:
        path, provider_id = spec.rsplit("=", 1)
        consumer = Kube.from_kubeconfig(args.consumer_kubeconfig, USER_AGENT)
        standins[provider_id] = ProviderStandIn(
            consumer, Kube.from_kubeconfig(path, USER_AGENT), args.consumer_id, provider_id, ca, args.resync
        )
    watches = ConsumerWatches(Kube.from_kubeconfig(args.consumer_kubeconfig, USER_AGENT), standins)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for standin in standins.values():
        standin.start()
    watches.start()
    log.info("stand-ins running for %s", ", ".join(standins))
    while not done.wait(1):
        pass
    watches.stop()
    for standin in standins.values():
        standin.request_stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
