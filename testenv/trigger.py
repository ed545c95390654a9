"""Act the moment something happens on a cluster: a watch in a thread, with informer semantics.

    with When(predicate, action, list_fn, *args) as when:
        ...                      # make it happen
        when.wait(timeout=60)    # the action has run

The watch starts with the current objects as ADDED events (a watch without resourceVersion does), so an
object that appeared before the watch started is not missed. `action` runs once, on the watch's thread,
for the first event the predicate accepts: the tests use it to SIGKILL the operator at an exact step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from kubernetes import watch

Event = dict[str, Any]  # {"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}


class When:
    def __init__(
        self,
        predicate: Callable[[Event], bool],
        action: Callable[[], None],
        list_fn: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.predicate, self.action = predicate, action
        self.list_fn, self.args, self.kwargs = list_fn, args, kwargs
        self.fired = threading.Event()
        self.seen = threading.Event()  # the watch has delivered its first event (the replay of what exists)
        self.error: BaseException | None = None
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            # One long watch: a restarted one would replay existing objects as ADDED, and fire late.
            for event in self._watch.stream(self.list_fn, *self.args, timeout_seconds=600, **self.kwargs):
                self.seen.set()
                if self.predicate(event):
                    self.action()
                    self.fired.set()
                    self._watch.stop()
                    return
        except BaseException as exc:  # reported by wait()
            self.error = exc
            self.fired.set()

    def __enter__(self) -> When:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._watch.stop()

    def wait_seen(self, timeout: float) -> None:
        """Until the watch has replayed an existing object: then a deletion cannot happen unseen before it."""
        if not self.seen.wait(timeout):
            raise AssertionError(f"timed out after {timeout}s: the watch replayed no existing object")

    def wait(self, timeout: float) -> None:
        if not self.fired.wait(timeout):
            raise AssertionError(f"timed out after {timeout}s: the awaited event never came")
        if self.error is not None:
            raise AssertionError(f"the watch failed: {self.error!r}") from self.error


def named(name: str, types: tuple[str, ...] = ("ADDED",)) -> Callable[[Event], bool]:
    """An event of one of these types about the object of that name."""
    return lambda e: e["type"] in types and e["object"]["metadata"]["name"] == name


def deleting(name: str) -> Callable[[Event], bool]:
    """The object of that name is being deleted (deletionTimestamp set) or gone."""
    return lambda e: (
        e["object"]["metadata"]["name"] == name
        and (e["type"] == "DELETED" or bool(e["object"]["metadata"].get("deletionTimestamp")))
    )


def condition_true(name: str, condition: str) -> Callable[[Event], bool]:
    """The LiqoPeering of that name has the condition True."""

    def check(e: Event) -> bool:
        obj = e["object"]
        conds = (obj.get("status") or {}).get("conditions") or []
        return obj["metadata"]["name"] == name and any(
            c.get("type") == condition and c.get("status") == "True" for c in conds
        )

    return check
