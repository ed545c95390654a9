"""Errors the engine reports in status: each has a CamelCase reason and a message that says the fix.

An answer of an API server is kept as data (``ApiError``: whose server, what was asked, what it answered),
and its message is built from those fields in one place (``describe``). Whatever classifies an error (is it
transient, is it the operator's own cluster, may apply fall back from patch) reads fields, never text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self, TypeVar

CONSUMER = "consumer"  # the cluster the operator runs in
PROVIDER = "provider"  # the cluster the Secret's kubeconfig reaches

# How to fix a right the provider's kubeconfig lacks in the forward direction.
PEERING_USER_FIX = "grant it (Liqo's peering-user has every right the operator needs: liqoctl generate peering-user)"
# ... and in the reverse direction (spec.bidirectional), where the operator acts on the provider as Liqo's
# consumer there: Liqo's peering-user may write only in the consumer's tenant namespace on the provider.
REVERSE_FIX = (
    "the reverse direction (spec.bidirectional) acts on the provider as Liqo's consumer there, so its kubeconfig"
    " needs more than Liqo's peering-user: to read Secret {liqo}/authentication-keys (the provider's Liqo key,"
    " which signs its Tenant) and virtual Nodes, as liqoctl peer run from the provider does; grant it, or set"
    " spec.bidirectional to false"
)
CONSUMER_FIX = "grant it to the operator's ServiceAccount (the Helm chart's RBAC)"


class PeeringError(Exception):
    """A failure that the LiqoPeering status shows as peerStatus=error.

    ``reason`` is the class's, never given where the error is raised: each reason the status shows is one
    class's (one that names its cluster is a subclass per side, which the base picks when made for a side).
    ``transient`` errors are retried with backoff (unreachable cluster, Liqo not ready yet); the others
    wait for the user to change something (the Secret, the spec), which triggers a new reconcile.
    ``side`` is the cluster the failure is about, when it is about one. A ``waiting`` error is a normal wait
    (Liqo still starting, a certificate being issued, a namespace going away): the peering is establishing,
    not in error, until its timeout, and no Warning Event says otherwise.
    """

    reason = "ReconcileError"
    transient = True
    waiting = False
    side: str | None = None

    def __init__(self, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if transient is not None:
            self.transient = transient

    def restated(self, message: str, *, transient: bool | None = None) -> Self:
        """The same error told where it was met (whose kubeconfig, what minting needs): its class, hence its
        reason, and its fields stay."""
        other = type(self).__new__(type(self))
        other.__dict__.update(vars(self), message=message)
        other.args = (message,)
        if transient is not None:
            other.transient = transient
        return other


E = TypeVar("E", bound=PeeringError)


def _of_side(cls: type[E], side: str | None, consumer: type[E], provider: type[E]) -> type[E]:
    """The class of an error whose reason names its cluster: that side's subclass (any side but the
    consumer is the provider's); a subclass made by name stays itself."""
    if issubclass(cls, consumer | provider):
        return cls
    return consumer if side == CONSUMER else provider


class InvalidSpec(PeeringError):
    """The spec passes the CRD's schema but not the operator's model: only a new spec fixes it."""

    reason = "InvalidSpec"
    transient = False


class SecretNotFound(PeeringError):
    reason = "SecretNotFound"
    transient = False


class SecretKeyMissing(PeeringError):
    reason = "SecretKeyMissing"
    transient = False


class ClusterProfileNotFound(PeeringError):
    """The ClusterProfile spec.remoteClusterProfileRef names is absent (its creation wakes the peering), or this
    cluster does not serve ClusterProfiles at all (retried: installing the CRD is no change to the peering)."""

    reason = "ClusterProfileNotFound"
    transient = False


class ClusterProfileUnhealthy(PeeringError):
    """The ClusterProfile's ControlPlaneHealthy condition is not True: the provider is not peered with (no stage
    starts) until its cluster manager says it is healthy again, which wakes the peering."""

    reason = "ClusterProfileUnhealthy"
    transient = False


class NoAccessProvider(PeeringError):
    """None of the access providers of the operator's provider file is one the ClusterProfile offers, or the
    operator has no provider file (--clusterprofile-provider-file)."""

    reason = "NoAccessProvider"
    transient = False


class AccessProviderFailed(PeeringError):
    """The access provider's plugin failed, timed out, said too much or gave no token: retried with backoff
    (the plugin may answer the next time)."""

    reason = "AccessProviderFailed"
    transient = True


class ClusterUnreachable(PeeringError):
    """No answer from a cluster's API server: ``why`` in a few words (no credentials in it). Made for a side,
    it is ConsumerUnreachable or ProviderUnreachable."""

    def __new__(cls, side: str = "", *args: Any, **kwargs: Any) -> ClusterUnreachable:
        return super().__new__(_of_side(cls, side, ConsumerUnreachable, ProviderUnreachable))

    def __init__(self, side: str, server: str, why: str) -> None:
        self.side, self.server, self.why = side, server, why
        super().__init__(
            f"cannot reach the {side} cluster at {server} ({why[:200]}); check that its API server is up and"
            f" reachable from the operator"
        )


class ConsumerUnreachable(ClusterUnreachable):
    reason = "ConsumerUnreachable"


class ProviderUnreachable(ClusterUnreachable):
    reason = "ProviderUnreachable"


class LiqoNotInstalled(PeeringError):
    reason = "LiqoNotInstalled"


class CloudIdentityFailed(PeeringError):
    """The operator's own cloud identity gave no token for a managed provider (spec.remoteCluster): no
    credentials in its Pod, or the cloud refused them. Retried: granting them needs no change to the LiqoPeering."""

    reason = "CloudIdentityFailed"


class KindNotServed(PeeringError):
    """The consumer does not serve a kind that is not Liqo's (Cluster API's Cluster, the ClusterProfile):
    installing its CRD fixes it, and the retry finds it."""

    reason = "KindNotServed"


class LiqoNotReady(PeeringError):
    reason = "LiqoNotReady"
    waiting = True


class LiqoVersionUnsupported(PeeringError):
    """A cluster runs a Liqo this operator cannot peer with (older than v1.0): nothing retried helps."""

    reason = "LiqoVersionUnsupported"
    transient = False

    def __init__(self, message: str, *, side: str | None, found: str, supported: str) -> None:
        super().__init__(message)
        self.side = side  # "consumer" or "provider"; None: the pair (a skew)
        self.found = found  # the version(s) found, as the status shows them
        self.supported = supported  # what the operator accepts


class LiqoVersionSkew(LiqoVersionUnsupported):
    """The two clusters run different minor versions of Liqo, which Liqo does not support peering."""

    reason = "LiqoVersionSkew"


class DuplicatePeering(PeeringError):
    reason = "DuplicatePeering"
    transient = False


class ResourceSliceDenied(PeeringError):
    reason = "ResourceSliceDenied"
    transient = False


class GatewayUnreachable(PeeringError):
    """Liqo's Connection is in Error: the gateway client cannot reach the gateway server's endpoint."""

    reason = "GatewayUnreachable"


class CertificateRefused(PeeringError):
    """The provider's signer denied or failed the minted user's CSR."""

    reason = "CertificateRefused"
    transient = False


class CertificateNotIssued(PeeringError):
    """The provider approved the minted user's CSR but its signer did not issue the certificate in time."""

    reason = "CertificateNotIssued"
    waiting = True


@dataclass(frozen=True)
class Request:
    """One request to an API server, as RBAC names it: ``verb`` (get, list, watch, create, update, patch,
    delete) on ``resource`` (a plural, ``/subresource`` appended) of ``group`` ("" for the core group)."""

    server: str  # the API server's URL, never credentials
    verb: str
    group: str = ""
    resource: str = "?"
    namespace: str | None = None
    name: str | None = None

    @property
    def what(self) -> str:
        """``tenants.authentication.liqo.io liqo-tenant-x/y``, ``secrets in namespace t``, ``nodes (cluster-wide)``."""
        return self._what(self.name)

    @property
    def right(self) -> str:
        """What a Role must allow ``verb`` on: a create is allowed on the collection, not on a name."""
        return self._what(None if self.verb == "create" else self.name)

    def _what(self, name: str | None) -> str:
        plural, _, sub = self.resource.partition("/")
        resource = plural + (f".{self.group}" if self.group else "") + (f"/{sub}" if sub else "")
        if name:
            return f"{resource} {self.namespace}/{name}" if self.namespace else f"{resource} {name}"
        return f"{resource} in namespace {self.namespace}" if self.namespace else f"{resource} (cluster-wide)"


class ApiError(PeeringError):
    """An API server's error answer: ``status`` (HTTP), the Status object's ``server_reason`` and
    ``server_message`` (redacted), to ``request`` from the ``side`` cluster. 409 conflicts, 429 and 5xx
    pass by themselves; an object the server refuses as invalid (422) or a missing one (404) does not.

    ``message`` is for test doubles that stand in for a server; a real answer's message is ``describe()``.
    """

    reason = "ApiError"

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int,
        side: str | None = None,
        request: Request | None = None,
        server_reason: str = "",
        server_message: str = "",
        body: dict[str, Any] | None = None,
        reverse: bool = False,
        liqo_namespace: str = "liqo",
    ) -> None:
        self.status = status
        self.side = side
        self.request = request or Request(server="?", verb="?")
        self.server_reason = server_reason
        self.server_message = server_message
        self.body = body or {}  # the server's Status object, when it sent one
        # The reverse direction (spec.bidirectional), and the Liqo namespace of its consumer (the provider):
        # only the fix a refusal names depends on them.
        self.reverse = reverse
        self.liqo_namespace = liqo_namespace
        self.described = message is None  # the message is built from the fields (not a test double's)
        super().__init__(message if message is not None else self.describe(), transient=self._transient())

    # The fields the request adds, by the names Kubernetes gives them.
    @property
    def verb(self) -> str:
        return self.request.verb

    @property
    def resource(self) -> str:
        return self.request.resource

    @property
    def group(self) -> str:
        return self.request.group

    @property
    def namespace(self) -> str | None:
        return self.request.namespace

    @property
    def name(self) -> str | None:
        return self.request.name

    def _transient(self) -> bool:
        return self.status in (409, 429) or self.status >= 500

    @property
    def cluster(self) -> str:
        return f"the {self.side} cluster at {self.request.server}"

    @property
    def refused(self) -> str:
        """What was refused, without the fix: ``the provider cluster at U answered 422 to create tenants...``."""
        said = self.server_message or self.server_reason
        detail = f": {said}" if said else ""
        return f"{self.cluster} answered {self.status} to {self.verb} {self.request.what}{detail}"

    def describe(self) -> str:
        return self.refused

    def restated(self, message: str, *, transient: bool | None = None) -> Self:
        other = super().restated(message, transient=transient)
        other.described = False  # told where it was met: no longer built from the fields
        return other

    def in_reverse(self, liqo_namespace: str) -> ApiError:
        """The same answer met by the reverse direction, whose consumer (the provider) has Liqo in
        ``liqo_namespace``: only the fix it names changes."""
        other = type(self).__new__(type(self))
        other.__dict__.update(vars(self), reverse=True, liqo_namespace=liqo_namespace)
        if self.described:
            other.message = other.describe()
            other.args = (other.message,)
        return other


class AccessRefused(ApiError):
    """The cluster refuses the request's identity: its credentials (Unauthorized) or a right it lacks
    (ClusterForbidden)."""

    def _transient(self) -> bool:
        return True  # a right granted on the cluster takes effect without any change to the LiqoPeering


class ClusterForbidden(AccessRefused):
    """403 from the authorizer (RBAC): the identity lacks a right. Only this refusal makes ``apply`` fall
    back from patch (server-side apply) to create and update. Made for a side, it is ConsumerForbidden or
    ProviderForbidden."""

    def __new__(cls, message: str | None = None, *, side: str | None = None, **fields: Any) -> ClusterForbidden:
        return super().__new__(_of_side(cls, side, ConsumerForbidden, ProviderForbidden))

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        fields.setdefault("status", 403)
        super().__init__(message, **fields)

    @property
    def fix(self) -> str:
        if self.side == CONSUMER:
            return CONSUMER_FIX
        return REVERSE_FIX.format(liqo=self.liqo_namespace) if self.reverse else PEERING_USER_FIX

    @property
    def refused(self) -> str:
        who = "the operator" if self.side == CONSUMER else "the kubeconfig's identity"
        reason = f" {self.server_reason}" if self.server_reason else ""
        return f"{self.cluster} does not let {who} {self.verb} {self.request.right} ({self.status}{reason})"

    def describe(self) -> str:
        return f"{self.refused}; {self.fix}"


class ConsumerForbidden(ClusterForbidden):
    reason = "ConsumerForbidden"


class ProviderForbidden(ClusterForbidden):
    reason = "ProviderForbidden"


class Unauthorized(AccessRefused):
    """401: the server does not accept the credentials at all (expired, revoked, another cluster's). Made for
    a side, it is ConsumerUnauthorized or ProviderUnauthorized."""

    def __new__(cls, message: str | None = None, *, side: str | None = None, **fields: Any) -> Unauthorized:
        return super().__new__(_of_side(cls, side, ConsumerUnauthorized, ProviderUnauthorized))

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        fields.setdefault("status", 401)
        super().__init__(message, **fields)

    @property
    def refused(self) -> str:
        reason = f" {self.server_reason}" if self.server_reason else ""
        return f"{self.cluster} does not accept the kubeconfig's credentials ({self.status}{reason})"

    def describe(self) -> str:
        # The credentials come from a Secret, an access provider or the operator's cloud identity: each of them
        # is fixed where it comes from.
        return (
            f"{self.refused}; put a valid, unexpired one in the Secret, or (a ClusterProfile's access provider, the"
            f" operator's cloud identity) have the provider accept the identity that token is for"
        )


class ConsumerUnauthorized(Unauthorized):
    reason = "Unauthorized"  # the operator's own ServiceAccount: the name it had before the provider's


class ProviderUnauthorized(Unauthorized):
    reason = "ProviderUnauthorized"


class Refusal(ApiError):
    """A write the cluster's admission refused: fixed on that cluster, not in the spec, and retried."""

    def _transient(self) -> bool:
        return True

    @property
    def refused(self) -> str:
        return f"{self.cluster} refused to {self.verb} {self.request.what}"


class QuotaExceeded(Refusal):
    """A ResourceQuota in the namespace is full: ``quota`` names it, ``limited`` says what it limits."""

    reason = "QuotaExceeded"

    def __init__(self, message: str | None = None, *, quota: str = "", limited: str = "", **fields: Any) -> None:
        self.quota, self.limited = quota, limited
        fields.setdefault("status", 403)
        super().__init__(message, **fields)

    def describe(self) -> str:
        quota = f"ResourceQuota {self.namespace}/{self.quota}" if self.namespace else f"ResourceQuota {self.quota}"
        limits = f" (limited: {self.limited})" if self.limited else ""
        return (
            f"{self.refused}: {quota} does not allow it{limits}: {self.server_message}; raise that quota's limit or"
            f" delete the quota on the {self.side} cluster, and the peering resumes by itself"
        )


class AdmissionDenied(Refusal):
    """A validating webhook or admission policy denied the write, whatever the status it chose (403 as
    OPA Gatekeeper, 400 without a code, 422 for a ValidatingAdmissionPolicy). ``admission`` names it."""

    reason = "AdmissionDenied"

    def __init__(self, message: str | None = None, *, admission: str = "", **fields: Any) -> None:
        self.admission = admission
        super().__init__(message, **fields)

    def describe(self) -> str:
        by = self.admission or "an admission check"
        return (
            f"{self.refused} ({self.status}): {self.server_message}; the object is what Liqo needs: make {by} on"
            f" the {self.side} cluster allow it, and the peering resumes by itself"
        )


class NamespaceTerminating(Refusal):
    """Nothing new may be created in a namespace being deleted; a finalizer may hold it there for good."""

    reason = "NamespaceTerminating"
    waiting = True

    def describe(self) -> str:
        ns = self.namespace
        return (
            f"{self.refused}: namespace {ns} is being deleted; the operator creates it again once it is gone. If it"
            f" stays terminating, something holds it: kubectl get namespace {ns} -o yaml on the {self.side} cluster"
            f" (status.conditions) names the finalizers and objects left"
        )


class BadAnswer(PeeringError):
    """An answer the client would not read: too large, too slow, malformed, of the wrong shape, or a redirect.

    Another cluster is another trust domain: whatever its API server (or anything in front of it) sends is
    read within bounds, and an answer beyond them fails the request, not the operator. ``limit`` is the
    bound it crossed, when one did; ``found`` says what came instead. Retried with backoff: an API server
    (or a proxy) that answers properly again brings the peering back by itself.
    """

    transient = True
    problem = "sent an answer the operator does not read"

    def __init__(self, side: str, request: Request, found: str, limit: str = "") -> None:
        self.side, self.request, self.found, self.limit = side, request, found, limit
        bound = f" (the operator reads at most {limit})" if limit else ""
        super().__init__(
            f"the {side} cluster at {request.server} {self.problem} to {request.verb} {request.what}: {found}{bound};"
            f" check what answers at that address (the API server, or a proxy or load balancer in front of it)."
            f" Retried: the peering resumes by itself once the answers are valid"
        )


class AnswerTooLarge(BadAnswer):
    """A body or a watch event larger than the client reads (clients/bounds.py)."""

    problem = "sent too large an answer"

    def __new__(cls, side: str = "", *args: Any, **kwargs: Any) -> AnswerTooLarge:
        return super().__new__(_of_side(cls, side, ConsumerAnswerTooLarge, ProviderAnswerTooLarge))


class ConsumerAnswerTooLarge(AnswerTooLarge):
    reason = "ConsumerAnswerTooLarge"


class ProviderAnswerTooLarge(AnswerTooLarge):
    reason = "ProviderAnswerTooLarge"


class AnswerTooSlow(BadAnswer):
    """No whole answer within the request's total deadline, or a watch event left unfinished too long."""

    problem = "did not finish its answer in time"

    def __new__(cls, side: str = "", *args: Any, **kwargs: Any) -> AnswerTooSlow:
        return super().__new__(_of_side(cls, side, ConsumerAnswerTooSlow, ProviderAnswerTooSlow))


class ConsumerAnswerTooSlow(AnswerTooSlow):
    reason = "ConsumerAnswerTooSlow"


class ProviderAnswerTooSlow(AnswerTooSlow):
    reason = "ProviderAnswerTooSlow"


class AnswerInvalid(BadAnswer):
    """Not JSON, JSON nested deeper than the client reads, not the shape asked for, or a redirect (which
    the client never follows: the credentials are for that server only)."""

    problem = "sent an invalid answer"

    def __new__(cls, side: str = "", *args: Any, **kwargs: Any) -> AnswerInvalid:
        return super().__new__(_of_side(cls, side, ConsumerAnswerInvalid, ProviderAnswerInvalid))


class ConsumerAnswerInvalid(AnswerInvalid):
    reason = "ConsumerAnswerInvalid"


class ProviderAnswerInvalid(AnswerInvalid):
    reason = "ProviderAnswerInvalid"


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


class PassCrashed(PeeringError):
    """The operator died (out of memory, a hard exit, a native crash) ``deaths`` times in a row during passes
    (``phase``: reconcile, teardown) of this object: they are put aside for ``backoff`` seconds, so that the
    others go on. Not retried before then, unless the object changes."""

    reason = "PassCrashed"
    transient = False

    def __init__(self, deaths: int, phase: str, backoff: float) -> None:
        self.deaths, self.phase, self.backoff = deaths, phase, backoff
        super().__init__(
            f"the operator died {deaths} times in a row during a {phase} of this object (out of memory, a hard"
            f" exit or a crash: the operator's previous log says which); its passes are put aside for"
            f" {round(backoff / 60)} min, then retried. Change its spec or an annotation to retry at once"
        )


def as_peering_error(exc: Exception, where: str) -> PeeringError:
    """What a pass reports for ``exc``: a PeeringError as it is, anything else as an InternalError."""
    return exc if isinstance(exc, PeeringError) else InternalError(exc, where)


def unexpected(exc: Exception) -> Exception | None:
    """What a log line's traceback shows for ``exc``: a typed error is data, reported without one; anything
    else is a bug, logged with its traceback."""
    return None if isinstance(exc, PeeringError) else exc


def own_cluster_unavailable(exc: PeeringError) -> bool:
    """The operator's own API server is down, restarting or overloaded: nothing the peering did. Such a pass
    is retried and never reported in the status, which it could not write anyway, or would make flap."""
    if exc.side != CONSUMER:
        return False
    if isinstance(exc, ClusterUnreachable | AnswerTooSlow):  # AnswerTooSlow: overloaded, as a 429 says
        return True
    return type(exc) is ApiError and (exc.status == 429 or exc.status >= 500)
