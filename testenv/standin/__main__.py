"""python -m testenv.standin --consumer-kubeconfig A --provider-kubeconfig B [--liqo-namespace liqo]"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from testenv.kube import Kube

from .standin import StandIn

USER_AGENT = "testenv-standin"  # its writes in the audit log (testenv.audit)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m testenv.standin", description="Liqo stand-in for two local clusters (NOT Liqo)."
    )
    p.add_argument("--consumer-kubeconfig", required=True)
    p.add_argument("--provider-kubeconfig", required=True)
    p.add_argument("--liqo-namespace", default="liqo")
    p.add_argument("--resync", type=float, default=5.0, help="seconds between full passes without events")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # "pool is full" noise from the watch threads
    standin = StandIn(
        Kube.from_kubeconfig(args.consumer_kubeconfig, USER_AGENT),
        Kube.from_kubeconfig(args.provider_kubeconfig, USER_AGENT),
        args.liqo_namespace,
        args.resync,
    )

    def _term(_sig: int, _frame: FrameType | None) -> None:
        standin.request_stop()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    logging.getLogger("liqo_standin").info("liqo-standin running (it is not Liqo: see the package docstring)")
    standin.start()
    standin.wait()
    standin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
