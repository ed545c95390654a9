"""The operator as users run it, plus fault points at its client calls: the harness's wrapper for
tests/e2e/test_faults.py. The product has no such hook; testenv.operator_support starts this script in place of
`liqo-peering-operator` when a test asks for faults (OperatorProcess(faults=True)), with LIQO_PEERING_FAULTS
naming a directory.

Each call a ClusterClient makes (get, find, apply, create, delete, patch, ...) first looks in that directory:

- a file ``record``: the call is appended to ``calls``, one line ``<side> <verb> <plural>``;
- a file ``raise`` holding such lines: the first call that matches a line takes it (moved to ``raised``)
  and raises a RuntimeError, once per line.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liqo_peering.cli import main
from liqo_peering.clients.cluster import ClusterClient

ENV = "LIQO_PEERING_FAULTS"
_LOCK = threading.Lock()

# ClusterClient's calls, each with the verb it is recorded as; those whose plural names the subresource.
VERBS = {
    "get": "get",
    "read": "get",
    "find": "list",
    "apply": "apply",
    "create_if_absent": "create",
    "merge_patch": "patch",
    "edit_finalizers": "patch",
    "delete": "delete",
    "create": "create",
    "replace_subresource": "update",
    "replace": "update",
}
WITH_SUBRESOURCE = {"merge_patch", "replace_subresource"}


def at(directory: Path, side: str, verb: str, plural: str) -> None:
    """At the start of a client call: record it, or raise at it, as the directory's files ask."""
    call = f"{side} {verb} {plural}"
    if (directory / "record").exists():
        with (directory / "calls").open("a") as calls:
            calls.write(call + "\n")
    with _LOCK:  # the pass's threads race for the lines: each raises once
        try:
            armed = (directory / "raise").read_text().splitlines()
        except FileNotFoundError:
            return
        if call not in armed:
            return
        left = [line for line in armed if line != call]
        with (directory / "raised").open("a") as raised:
            raised.write(call + "\n")
        if left:
            (directory / "raise.new").write_text("".join(line + "\n" for line in left))
            (directory / "raise.new").rename(directory / "raise")  # whole, never half written
        else:
            (directory / "raise").unlink()
    raise RuntimeError(f"fault injected at {call}")


def _point(directory: Path, method: str, call: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(call)

    @functools.wraps(call)
    def wrapped(self: ClusterClient, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        plural = bound["res"].plural
        if method in WITH_SUBRESOURCE and bound.get("subresource"):
            plural += f"/{bound['subresource']}"
        at(directory, self.side, VERBS[method], plural)
        return call(self, *args, **kwargs)

    return wrapped


def install(directory: Path) -> None:
    """Put a fault point at the start of each of ClusterClient's calls."""
    for method in VERBS:
        setattr(ClusterClient, method, _point(directory, method, getattr(ClusterClient, method)))


if __name__ == "__main__":
    install(Path(os.environ[ENV]))
    main()
