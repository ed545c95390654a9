"""Errors the engine reports in status: each has a CamelCase reason and a message that says the fix."""

from __future__ import annotations

from typing import Any


class PeeringError(Exception):
    """A failure that the LiqoPeering status shows as peerStatus=error.

    ``transient`` errors are retried with backoff (unreachable cluster, Liqo not ready yet); the others
    wait for the user to change something (the Secret, the spec), which triggers a new reconcile.
    """

    reason = "ReconcileError"
    transient = True

    def __init__(self, message: str, *, reason: str | None = None, transient: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if transient is not None:
            self.transient = transient


class SecretNotFound(PeeringError):
    reason = "SecretNotFound"
    transient = False


class SecretKeyMissing(PeeringError):
    reason = "SecretKeyMissing"
    transient = False


class ClusterUnreachable(PeeringError):
    reason = "ProviderUnreachable"


class ClusterForbidden(PeeringError):
    reason = "Forbidden"


class LiqoNotInstalled(PeeringError):
    reason = "LiqoNotInstalled"


class LiqoNotReady(PeeringError):
    reason = "LiqoNotReady"


class DuplicatePeering(PeeringError):
    reason = "DuplicatePeering"
    transient = False


class ResourceSliceDenied(PeeringError):
    reason = "ResourceSliceDenied"
    transient = False


class ConnectionFailed(PeeringError):
    reason = "ConnectionError"


class ApiError(PeeringError):
    """Any other answer of an API server that is an error: 409 conflicts, 422 invalid objects, 5xx.

    ``status`` is the HTTP status. Conflicts and server errors pass by themselves; an object the server
    refuses as invalid does not.
    """

    reason = "ApiError"

    def __init__(
        self, message: str, *, status: int, body: dict[str, Any] | None = None, side: str | None = None
    ) -> None:
        super().__init__(message, transient=status in (409, 429) or status >= 500)
        self.status = status
        self.body = body or {}  # the server's Status object, when it sent one
        self.side = side  # "consumer" or "provider": whose API server answered


class InternalError(PeeringError):
    """Anything but a PeeringError raised in a pass: a bug or an unexpected failure in the operator.

    ``failed`` is the exception and ``where`` the step it left (a stage, the pass). Retried with backoff, as
    the failure may not repeat; the message names it, so that the log can be found and reported.
    """

    reason = "InternalError"
    transient = True

    def __init__(self, failed: BaseException, where: str) -> None:
        self.failed = failed
        self.where = where
        super().__init__(
            f"{where} failed unexpectedly ({type(failed).__name__}: {str(failed)[:300]}); retrying. This is a bug"
            " or an unexpected failure in the operator: if it persists, report it with the operator's log"
        )


def as_peering_error(exc: Exception, where: str) -> PeeringError:
    """What a pass reports for ``exc``: a PeeringError as it is, anything else as an InternalError."""
    return exc if isinstance(exc, PeeringError) else InternalError(exc, where)


def own_cluster_unavailable(exc: PeeringError) -> bool:
    """The operator's own API server is down, restarting or overloaded: nothing the peering did. Such a pass
    is retried and never reported in the status, which it could not write anyway, or would make flap."""
    if exc.reason == "ConsumerUnreachable":
        return True
    return isinstance(exc, ApiError) and exc.side == "consumer" and (exc.status == 429 or exc.status >= 500)
