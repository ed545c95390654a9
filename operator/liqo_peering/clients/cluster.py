"""A thin, generic REST client for one cluster: the operator's one error boundary towards Kubernetes.

Every engine call goes through here, so timeouts, error wording and the side ("consumer" or
"provider") live in one place. Reads are served from the informers' caches when an informer covers
them (as controller-runtime's cached client does), and the client's own writes go into those caches,
so a pass reads what it just wrote; a miss always asks the API server.

Nothing above this layer sees the Kubernetes client's exceptions: every
failure is a PeeringError (ClusterUnreachable, LiqoNotInstalled, or an ApiError whose kind says what refused
the request: see answers.read) that says whether retrying can help. Server-side apply makes repeated
steps idempotent, and ``ensure`` skips the apply when the stored object already holds what it would send.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import structlog
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from liqo_peering.clients import answers, bounds
from liqo_peering.clients.connect import refuse_redirects
from liqo_peering.clients.interrupt import Connections, Deadline
from liqo_peering.errors import (
    AnswerInvalid,
    AnswerTooSlow,
    ApiError,
    ClusterForbidden,
    ClusterUnreachable,
    KindNotServed,
    LiqoNotInstalled,
    PeeringError,
    Request,
)
from liqo_peering.liqo import common
from liqo_peering.liqo.naming import FIELD_MANAGER
from liqo_peering.liqo.resources import Resource
from liqo_peering.liqo.stored import covers, overlay
from liqo_peering.redact import redact

log = structlog.get_logger("liqo_peering.clients")

# Each request's total time: connecting, sending, and reading the whole answer (interrupt.Deadline).
REQUEST_TIMEOUT = 15.0
# A watch event begun must end (its newline) within this: a stream that never completes one is closed.
EVENT_SECONDS = 30.0
PROBE_TIMEOUT = (2.0, 2.0)  # connect, read: an API server slower than this to say it is ready counts as down


class ClusterClient:
    def __init__(
        self,
        api: ApiClient,
        side: str,
        describe: str,
        request_timeout: float | tuple[float, float] = REQUEST_TIMEOUT,
        on_unauthorized: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        # Told of every 401: an access provider's token (clients/execplugin.py) is fetched again, as client-go does.
        self.on_unauthorized = on_unauthorized
        self.side = side  # "consumer" or "provider", used in messages
        self.describe = describe  # e.g. the server URL, never credentials
        self.request_timeout = request_timeout
        # Set while the health probe finds the API server down: every call then fails at once, instead of
        # each waiting for its own timeout (see probe and informer.Informer._probe).
        self.down: ClusterUnreachable | None = None
        self.answered_at = float("-inf")  # time.monotonic() of the last answer below 500 to a call
        # Its connections, so that the probe finding it down can also fail the calls already waiting (interrupt).
        self._connections = Connections()
        if api is not None:  # None: a test double that sends no request
            self._connections.track(api.rest_client.pool_manager)
            refuse_redirects(api.rest_client.pool_manager)
        self._informers: list[Any] = []  # clients.informer.Informer (attached by the informer itself)
        self._informers_lock = threading.Lock()
        self._no_patch: set[str] = set()  # kinds this credential may not patch (no server-side apply)
        # Kinds whose objects this credential may neither patch nor update (Liqo's peering-user: the provider's
        # tenant namespace and nonce Secret): their common metadata stays as created.
        self._no_relabel: set[str] = set()

    # -- plumbing -------------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] | None = None,
        probing: bool = False,
    ) -> Any:
        """Send one request and return the raw urllib3 response (not read yet)."""
        down = self.down
        if down is not None and not probing:
            raise ClusterUnreachable(down.side or self.side, down.server, down.why)
        headers = {"Accept": "application/json"}
        if content_type or body is not None:
            headers["Content-Type"] = content_type or "application/json"
        _method, url, headers, _, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        try:
            # The REST layer serialises dict bodies as JSON (valid YAML for server-side apply too).
            return self.api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=timeout or self.request_timeout
            )
        except ApiException as exc:
            if exc.status:
                answer = str(exc.body or "")[: bounds.MAX_ERROR_BYTES]
                raise self._translate(method, path, exc.status, exc.reason, answer, _created(method, body)) from None
            raise self._unreachable(exc.reason or "no response", probing) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(_why(exc), probing) from None

    def _unreachable(self, why: str, probing: bool = False) -> ClusterUnreachable:
        down = self.down
        if down is not None and not probing:
            # Most likely interrupted (see interrupt): why the probe counts it down says more than "aborted".
            return ClusterUnreachable(down.side or self.side, down.server, down.why)
        return ClusterUnreachable(self.side, self.describe, redact(why)[:200])

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str | None = None,
        limit: int = bounds.MAX_OBJECT_BYTES,
    ) -> Any:
        """Send a request and read its answer within bounds (clients/bounds.py): its JSON, a JSON object
        (a Kubernetes object for a write), or None when the body is empty."""
        request = answers.request_of(self.describe, method, path, _created(method, body))
        with self._connections.deadline(_total(self.request_timeout)) as deadline:
            try:
                resp = self._request(method, path, body=body, query=query, content_type=content_type)
                if resp.status < 500:
                    self.answered_at = time.monotonic()  # as good as a probe (see answered_within)
                raw = resp.response
                if resp.status >= 300:
                    raise self._refusal(method, path, resp, _created(method, body))
                data, more = bounds.read_capped(raw, limit)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise self._failed(request, deadline, _why(exc)) from None
            except ClusterUnreachable as exc:
                raise self._failed(request, deadline, exc.why) from None
            if deadline.passed:  # cut short: what came may look whole (headers cut off are headers ended)
                raise self._failed(request, deadline, "cut at its deadline")
        if more:
            bounds.discard(raw)
            raise bounds.too_large(self.side, request, limit)
        if not data:
            return None
        found = bounds.parse(data, self.side, request)
        if method in ("POST", "PUT", "PATCH"):
            return bounds.an_object(found, self.side, request)
        return bounds.a_json_object(found, self.side, request)

    def _refusal(self, method: str, path: str, resp: Any, created: str | None = None) -> ApiError | AnswerInvalid:
        """What an answer that is no success is: a redirect (never followed: the credentials are for this
        server only, and urllib3 is told not to follow, connect.py), or an error (its first bytes read)."""
        raw = resp.response
        status = int(resp.status)
        data, more = bounds.read_capped(raw, bounds.MAX_ERROR_BYTES)
        if more:  # the rest is never read
            bounds.discard(raw)
        if status < 400:
            where = redact(str(raw.headers.get("Location") or "nowhere"))[:200]
            request = answers.request_of(self.describe, method, path, created)
            found = f"a redirect ({status}) to {where}, which the operator never follows"
            return AnswerInvalid(self.side, request, found)
        return self._translate(method, path, status, resp.reason, bytes(data).decode(errors="replace"), created)

    def _failed(self, request: Request, deadline: Deadline, why: str) -> ClusterUnreachable | AnswerTooSlow:
        """A request that broke off: cut at its deadline (interrupt.Deadline), or the cluster is unreachable."""
        if deadline.passed and self.down is None:
            return AnswerTooSlow(self.side, request, "no whole answer in time", f"{deadline.seconds:g} s per request")
        return self._unreachable(why)

    def _request_of(self, method: str, path: str) -> Request:
        return answers.request_of(self.describe, method, path)

    def _translate(
        self, method: str, path: str, status: int, reason: str | None, body: str, name: str | None = None
    ) -> ApiError:
        """The error an answer is; ``name``: the object a create sent (its path names none)."""
        request = answers.request_of(self.describe, method, path, name)
        if status == 401 and self.on_unauthorized is not None:
            self.on_unauthorized()
        return answers.read(self.side, request, status, reason, body)

    @staticmethod
    def _is_missing_type(exc: ApiError) -> bool:
        """404 for a resource type the server does not serve (CRD absent), not for a missing object."""
        details = exc.body.get("details") or {}
        return not details.get("name")

    def _not_installed(self, res: Resource) -> LiqoNotInstalled | KindNotServed:
        if not res.group.endswith("liqo.io"):
            return KindNotServed(
                f"the {self.side} cluster at {self.describe} does not serve {res.plural}.{res.group}: install"
                f" the CRD of {res.kind} ({res.api_version}) there"
            )
        return LiqoNotInstalled(
            f"the {self.side} cluster at {self.describe} does not serve {res.plural}.{res.group}: Liqo is not"
            f" installed there; install Liqo v1.x on the {self.side} cluster"
        )

    # -- reads ----------------------------------------------------------------------------------
    def get(
        self, res: Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        """From an informer that holds it, or that knows it is absent (as controller-runtime's cached client
        answers NotFound), else from the API server. ``carries``: labels the object has if it exists (a
        selector), so that an informer whose scope selects everything with them knows it absent too."""
        self._raise_failed(res, namespace)
        known, hit = self._from_cache(res, name, namespace, carries)
        if hit is not None:
            return dict(hit)
        return None if known else self._get_live(res, name, namespace)

    def cached(self, res: Resource, name: str, namespace: str | None = None) -> bool:
        """Whether ``get`` answers without a request: an informer holds the object or knows it is absent."""
        return self._from_cache(res, name, namespace)[0]

    def _from_cache(
        self, res: Resource, name: str, namespace: str | None, carries: str | None = None
    ) -> tuple[bool, dict[str, Any] | None]:
        """(known, object) from the synced informers: the object one holds, else whether one knows it absent."""
        absent = False
        for informer in self._covering(res, namespace):
            selects = carries is not None and informer.scope.fields is None
            labelled = selects and selector_within(informer.scope.labels, carries)
            known, hit = informer.lookup(namespace if res.namespaced else None, name, labelled)
            if hit is not None:
                return True, hit
            absent = absent or known
        return absent, None

    def read(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object as the API server has it now, never from an informer's cache, which may not have seen
        the change that woke the caller yet."""
        return self._get_live(res, name, namespace)

    def _get_live(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        path = res.path(namespace, name)
        try:
            return bounds.an_object(self._call("GET", path), self.side, self._request_of("GET", path))
        except ApiError as exc:
            if exc.status == 404:
                if res.group and self._is_missing_type(exc):
                    raise self._not_installed(res) from None
                return None
            raise

    def find(
        self, res: Resource, namespace: str | None = None, labels: str | None = None, fields: str | None = None
    ) -> list[dict[str, Any]]:
        self._raise_failed(res, namespace)
        for informer in self._covering(res, namespace, labels, fields, by_name=False):
            return informer.cached_items(
                lambda meta: (
                    (namespace is None or meta.get("namespace") == namespace)
                    and selector_matches(labels, meta.get("labels") or {})
                    and _fields_match(fields, meta)
                )
            )
        query = []
        if labels:
            query.append(("labelSelector", labels))
        if fields:
            query.append(("fieldSelector", fields))
        path = res.path(namespace)
        try:
            answer = self._call("GET", path, query=query, limit=bounds.MAX_LIST_BYTES)
            return bounds.a_list(answer, self.side, self._request_of("GET", path))[0]
        except ApiError as exc:
            if exc.status == 404:
                raise self._not_installed(res) from None
            raise

    # -- writes ---------------------------------------------------------------------------------
    def apply(self, res: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply: creates or updates exactly the fields we own; safe to repeat.

        A credential that may create and update but not patch (Liqo's peering-user role on a provider)
        gets the same result through create, or get and update: see ``_create_or_update``.
        """
        if res.plural in self._no_patch:
            return self._create_or_update(res, body)
        meta = body["metadata"]
        query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
        try:
            return self._remember(
                res,
                self._call(
                    "PATCH",
                    res.path(meta.get("namespace"), meta["name"]),
                    body=body,
                    query=query,
                    content_type="application/apply-patch+yaml",
                ),
            )
        except ClusterForbidden:
            # Only RBAC refusing patch itself: a quota, a policy or a namespace being deleted would refuse
            # create and update as well, and once fixed patch works again.
            self._no_patch.add(res.plural)  # remembered: one refused patch per kind, not one per pass
            return self._create_or_update(res, body)
        except ApiError as exc:
            if exc.status == 404:
                raise self._not_installed(res) from None
            raise

    def _create_or_update(self, res: Resource, body: dict[str, Any], attempts: int = 3) -> dict[str, Any]:
        """Apply without patch: lay ``body`` over the live object and update it, or create it (409: again)."""
        meta = body["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        path = res.path(namespace, name)
        for attempt in range(attempts):
            updated = self._read_modify_write(
                res, name, namespace, lambda live: self._call("PUT", path, body=overlay(live, common.over(live, body)))
            )
            if updated is not None:
                return updated
            try:
                return self._remember(res, self._call("POST", res.path(namespace), body=body))
            except ApiError as exc:
                if exc.status == 404 and res.group and self._is_missing_type(exc):
                    raise self._not_installed(res) from None
                if exc.status != 409 or attempt == attempts - 1:
                    raise  # 409: created meanwhile; update it instead
        raise AssertionError("unreachable")

    def create_if_absent(self, res: Resource, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create, or return the existing object untouched (for objects that must not be rewritten)."""
        meta = body["metadata"]
        found = self.get(res, meta["name"], meta.get("namespace"))
        if found is not None:
            return found, False
        try:
            return self._remember(res, self._call("POST", res.path(meta.get("namespace")), body=body)), True
        except ApiError as exc:
            if exc.status == 409:
                # Made meanwhile, or before the informers' watch said so: the API server's copy.
                again = self._get_live(res, meta["name"], meta.get("namespace"))
                if again is not None:
                    return self._remember(res, again), False
            raise

    def create_or_relabel(
        self, res: Resource, body: dict[str, Any], owner: dict[str, str]
    ) -> tuple[dict[str, Any], bool]:
        """``create_if_absent``, and an existing object carrying ``owner``'s labels (made by this peering) gets
        the common labels and annotations ``body`` has now (spec.commonMetadata), by a merge patch of those
        alone: nothing else of it is rewritten."""
        found, created = self.create_if_absent(res, body)
        if created:
            return found, created
        return self.relabel(res, found, body, owner), False

    def relabel(
        self, res: Resource, live: dict[str, Any], body: dict[str, Any], owner: dict[str, str]
    ) -> dict[str, Any]:
        """Bring ``live``'s common metadata to ``body``'s if ``live`` is the peering's (its ``owner`` labels)."""
        labels = (live.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in owner.items()):
            return live
        patch = common.metadata_patch(live, body)
        if patch is None or res.plural in self._no_relabel:
            return live
        meta = live["metadata"]
        try:
            return self.merge_patch(res, meta["name"], meta.get("namespace"), patch) or live
        except ClusterForbidden as exc:
            # Labels are not worth a peering: say so once per kind, and leave the object as it was made.
            self._no_relabel.add(res.plural)
            log.warning(
                f"the {self.side}'s credential may not update {res.plural}: {res.kind} {meta.get('namespace') or ''}"
                f"/{meta['name']} keeps the labels and annotations it was created with ({redact(exc.message)})"
            )
            return live

    def merge_patch(
        self, res: Resource, name: str, namespace: str | None, patch: dict[str, Any], subresource: str | None = None
    ) -> dict[str, Any] | None:
        if subresource is None and res.plural in self._no_patch:
            return self._update(res, name, namespace, patch)
        try:
            return self._remember(
                res,
                self._call(
                    "PATCH",
                    res.path(namespace, name, subresource),
                    body=patch,
                    content_type="application/merge-patch+json",
                ),
            )
        except ClusterForbidden:
            if subresource is not None:
                raise
            self._no_patch.add(res.plural)
            return self._update(res, name, namespace, patch)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _read_modify_write(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        write: Callable[[dict[str, Any]], dict[str, Any] | None],
        attempts: int = 3,
        known: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """GET the live object (not a cache) and ``write(live)``, again on 409 (someone wrote in between). The
        written object (or the live one, when ``write`` wrote nothing); None when the object is absent.
        ``known``: a copy the caller read, written from first: a write that holds its resourceVersion as a
        precondition turns a stale copy into a 409, and the live object is read then."""
        for attempt in range(attempts):
            try:
                live = known if attempt == 0 and known is not None else self._call("GET", res.path(namespace, name))
                written = write(live)
                return self._remember(res, written) if written is not None else dict(live)
            except ApiError as exc:
                if exc.status == 404:
                    return None
                if exc.status != 409 or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _update(self, res: Resource, name: str, namespace: str | None, patch: dict[str, Any]) -> dict[str, Any] | None:
        """A merge patch without patch: get, lay ``patch`` over, update (409: again); None if absent."""
        path = res.path(namespace, name)
        return self._read_modify_write(
            res, name, namespace, lambda live: self._call("PUT", path, body=overlay(live, patch))
        )

    def edit_finalizers(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        edit: Callable[[dict[str, Any]], list[str] | None],
        known: dict[str, Any] | None = None,
    ) -> bool:
        """Set an object's finalizers to ``edit(live metadata)`` (None: leave them), with its resourceVersion as
        a precondition: another writer's finalizer is never lost (409: read the live object again). From
        ``known`` first, when the caller has just read it. False when the object is absent."""
        path = res.path(namespace, name)

        def write(live: dict[str, Any]) -> dict[str, Any] | None:
            meta = live.get("metadata") or {}
            finalizers = edit(meta)
            if finalizers is None:
                return None
            patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
            return dict(self._call("PATCH", path, body=patch, content_type="application/merge-patch+json"))

        return self._read_modify_write(res, name, namespace, write, known=known) is not None

    def delete(
        self, res: Resource, name: str, namespace: str | None = None, *, with_dependents: bool = False
    ) -> dict[str, Any] | None:
        """Delete; what is left: the object as the API server answered, while finalizers hold it, or None
        once it is gone (already, or a missing type). The answer says so, so no read has to follow.

        ``with_dependents``: foreground deletion, so the object stays until the garbage collector has
        removed what it owns, and "gone" means its dependents are gone too.
        """
        for informer in self._covering(res, namespace):
            informer.forget(namespace if res.namespaced else None, name)  # it may linger (finalizers): ask
        policy = "Foreground" if with_dependents else "Background"
        try:
            answer = self._call("DELETE", res.path(namespace, name), query=[("propagationPolicy", policy)])
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None
        return lingering(answer)

    def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self._remember(res, self._call("POST", res.path(namespace), body=body))

    def replace_subresource(
        self, res: Resource, name: str, namespace: str | None, subresource: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT a subresource with the whole object (a CSR's approval)."""
        return dict(self._call("PUT", res.path(namespace, name, subresource), body=body))

    def replace(self, res: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object: fields others set and ``body`` lacks are gone. Its resourceVersion is a
        precondition (ApiError 409 when the object changed meanwhile)."""
        meta = body["metadata"]
        return self._remember(res, self._call("PUT", res.path(meta.get("namespace"), meta["name"]), body=body))

    # -- the informers' caches ------------------------------------------------------------------
    def attach(self, informer: Any) -> None:
        with self._informers_lock:
            self._informers.append(informer)

    def detach(self, informer: Any) -> None:
        with self._informers_lock:
            if informer in self._informers:
                self._informers.remove(informer)

    def _covering(
        self,
        res: Resource,
        namespace: str | None,
        labels: str | None = None,
        fields: str | None = None,
        by_name: bool = True,
    ) -> list[Any]:
        """Synced informers of ``res`` that can serve a read in ``namespace``. A read by name (``by_name``) may
        use any of them, as its miss asks the API server. A list needs one whose scope holds every object the
        list selects: its label selector within ``labels``, and no field selector or exactly ``fields`` (an
        informer of one name holds no other object of the namespace)."""
        with self._informers_lock:
            informers = list(self._informers)
        return [
            i
            for i in informers
            if i.synced
            and i.scope.res == res
            and (i.scope.namespace is None or i.scope.namespace == namespace)
            and (
                by_name
                or (
                    selector_within(i.scope.labels, labels)
                    and (i.scope.fields is None or _terms(i.scope.fields) == _terms(fields))
                )
            )
        ]

    def _raise_failed(self, res: Resource, namespace: str | None) -> None:
        """An informer of ``res`` dropped its list or watch for a bad answer and is not synced again: reads
        report that, rather than go around it (the peering shows what its cluster sends)."""
        with self._informers_lock:
            informers = list(self._informers)
        for informer in informers:
            failed = informer.failed
            if (
                failed is not None
                and not informer.synced
                and informer.scope.res == res
                and (informer.scope.namespace is None or informer.scope.namespace == namespace)
            ):
                raise failed.with_traceback(None)  # raised again and again: its traceback must not grow

    def _remember(self, res: Resource, obj: Any) -> dict[str, Any]:
        """Put what the server answered to our write into the caches that cover it (read-your-writes)."""
        found = dict(obj)
        meta = found.get("metadata") or {}
        for informer in self._covering(res, meta.get("namespace")):
            if selector_matches(informer.scope.labels, meta.get("labels") or {}) and _fields_match(
                informer.scope.fields, meta
            ):
                informer.remember(found)
        return found

    def ensure(self, res: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """Apply ``body`` unless the stored object already holds it as Liqo stores it: quiet at rest."""
        meta = body["metadata"]
        live = self.get(res, meta["name"], meta.get("namespace"))
        if live is not None and covers(live, body):
            return live
        return self.apply(res, body)

    # -- health ------------------------------------------------------------------------------------
    def answered_within(self, seconds: float) -> bool:
        """Whether a call got an answer in the last ``seconds``: the API server was up then, as a probe would
        have found it, so a busy peering's calls spare the probe's requests."""
        return time.monotonic() - self.answered_at < seconds

    def probe(self) -> ClusterUnreachable | None:
        """GET /readyz with a short timeout: None when the API server answers, else why it counts as down.

        Any answer but a 5xx means it is up: a 401 or 403 is a credential's problem, which the calls report.
        """
        try:
            with self._connections.deadline(_total(PROBE_TIMEOUT)):
                resp = self._request("GET", "/readyz", timeout=PROBE_TIMEOUT, probing=True)
                _, more = bounds.read_capped(resp.response, bounds.MAX_ERROR_BYTES)
                if more:
                    bounds.discard(resp.response)
            status = int(resp.status)
        except ClusterUnreachable as exc:
            return exc
        except ApiError as exc:  # a 401 or 403 too: up
            status = exc.status
        except PeeringError:  # the credential's own failure (an access provider's plugin): the calls report it
            return None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return self._unreachable(_why(exc), probing=True)
        return self._unreachable(f"/readyz answered {status}", probing=True) if status >= 500 else None

    def read_path(self, path: str) -> Any | None:
        """GET a path outside any resource (/version, /apis/<group>, /openapi/v3/...): its JSON, None on 404."""
        try:
            return self._call("GET", path, limit=bounds.MAX_LIST_BYTES)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    # -- list and watch (for informers) ---------------------------------------------------------
    def list_page(
        self, res: Resource, namespace: str | None, labels: str | None = None, fields: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every matching object and the list's resourceVersion, to start a watch from."""
        query = [("labelSelector", labels)] if labels else []
        query += [("fieldSelector", fields)] if fields else []
        path = res.path(namespace)
        try:
            answer = self._call("GET", path, query=query, limit=bounds.MAX_LIST_BYTES)
        except ApiError as exc:
            if exc.status == 404:
                raise self._not_installed(res) from None
            raise
        return bounds.a_list(answer, self.side, self._request_of("GET", path))

    def stream(
        self,
        res: Resource,
        namespace: str | None,
        version: str,
        labels: str | None = None,
        fields: str | None = None,
        timeout_seconds: int = 240,
        on_open: Any = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events from ``version`` on, until the server ends the watch (timeout) or an error.

        ``on_open(response)`` receives the open response, so a stopping informer can shut it down
        instead of waiting for the next event.
        """
        query = [
            ("watch", "true"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        query += [("labelSelector", labels)] if labels else []
        query += [("fieldSelector", fields)] if fields else []
        path = res.path(namespace)
        request = self._request_of("WATCH", path)
        timeout = (10.0, timeout_seconds + 30.0)
        with self._connections.deadline(_total(timeout)) as deadline:
            end = deadline.at
            try:
                resp = self._request("GET", path, query=query, timeout=timeout)
                if resp.status >= 300:
                    raise self._refusal("WATCH", path, resp)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise self._failed(request, deadline, _why(exc)) from None
            except ClusterUnreachable as exc:
                raise self._failed(request, deadline, exc.why) from None
            raw = resp.response  # the urllib3 response, read incrementally
            if on_open is not None:
                on_open(raw)
            pending = bytearray()  # the event being received
            try:
                for chunk in raw.stream(bounds.CHUNK, decode_content=True):
                    start = len(pending)
                    pending += chunk
                    while (newline := pending.find(b"\n", start)) >= 0:
                        line = bytes(pending[:newline])
                        del pending[: newline + 1]
                        start = 0
                        if line.strip():
                            yield bounds.an_event(bounds.parse(line, self.side, request), self.side, request)
                    if len(pending) > bounds.MAX_EVENT_BYTES:
                        raise bounds.too_large(self.side, request, bounds.MAX_EVENT_BYTES, "a watch event")
                    # An event begun has EVENT_SECONDS to end; between events, the watch's own deadline holds.
                    at = min(end, time.monotonic() + EVENT_SECONDS) if pending else end
                    if bool(pending) == (deadline.at == end):
                        self._connections.tighten(deadline, at)
                if deadline.passed:  # cut short: a stream without chunks ends cleanly when cut
                    raise urllib3.exceptions.ProtocolError("cut at its deadline")
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if deadline.passed and self.down is None and deadline.at != end:
                    raise AnswerTooSlow(
                        self.side, request, "a watch event left unfinished", f"{EVENT_SECONDS:g} s per event"
                    ) from None
                raise self._failed(request, deadline, _why(exc)) from None
            except BaseException:
                bounds.discard(raw)  # a broken or abandoned stream: its rest is never read
                raise
            finally:
                raw.release_conn()

    def interrupt(self) -> int:
        """Fail every call in flight on this client's connections now, watches included (its API server
        was found down): each raises ClusterUnreachable instead of waiting for its timeout. How many."""
        return self._connections.interrupt()

    def close(self) -> None:
        """Release this client's connections (a rotated or dropped kubeconfig)."""
        self.api.close()


def _total(timeout: float | tuple[float, float]) -> float:
    """A request's total deadline from urllib3's timeout: a pair (connect, read) adds up."""
    return sum(timeout) if isinstance(timeout, tuple) else timeout


def _created(method: str, body: Any) -> str | None:
    """The name of the object a POST creates."""
    meta = body.get("metadata") if method == "POST" and isinstance(body, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def _why(exc: BaseException) -> str:
    """What failed, in a few words: urllib3's MaxRetryError says nothing until its reason is named."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        return f"{type(exc).__name__}: {type(reason).__name__}: {str(reason)[:120]}"
    return type(exc).__name__


def request_rights(method: str, path: str) -> tuple[str, str]:
    """The RBAC verb and the resource a request needs, as a Role names them.

    ``("patch", "gatewayservers.networking.liqo.io liqo-tenant-x/y")``.
    """
    request = answers.request_of("", method, path)
    return request.verb, request.what


_SET_TERM = re.compile(r"^(\S+?)\s+(in|notin)\s*\((.*)\)$")


def _terms(selector: str | None) -> set[str]:
    """A selector's terms, split on the commas outside ``in (a,b)`` lists, in one spelling each
    (``k in (a,b)``: the values sorted, no spaces but the two around the operator)."""
    terms, depth, term = [], 0, ""
    for ch in selector or "":
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(term)
            term = ""
        else:
            term += ch
    out = set()
    for raw in (*terms, term):
        found = _SET_TERM.match(raw.strip())
        if found:
            values = sorted(v.strip() for v in found[3].split(",") if v.strip())
            out.add(f"{found[1]} {found[2]} ({','.join(values)})")
        elif raw.strip():
            out.add("".join(raw.split()))
    return out


def _term_holds(term: str, labels: dict[str, str]) -> bool:
    """One term, as apimachinery's label parser reads it: ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``,
    ``k in (a,b)``, ``k notin (a,b)``."""
    found = _SET_TERM.match(term)
    if found:
        key, values = found[1], set(found[3].split(","))
        if found[2] == "notin":
            return key not in labels or labels[key] not in values
        return key in labels and labels[key] in values
    if term.startswith("!"):
        return term[1:] not in labels
    if "!=" in term:
        key, _, value = term.partition("!=")
        return labels.get(key) != value
    if "=" in term:
        key, _, value = term.partition("==") if "==" in term else term.partition("=")
        return key in labels and labels[key] == value
    return term in labels


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Label selectors as the API server reads them (equality- and set-based)."""
    return all(_term_holds(term, labels) for term in _terms(selector))


def lingering(answer: Any) -> dict[str, Any] | None:
    """A DELETE's answer: the object while finalizers keep it (deletionTimestamp set), else None. Deleted at
    once, the answer is the object as it was (no deletionTimestamp) or a Status."""
    if not isinstance(answer, dict) or answer.get("kind") == "Status":
        return None
    meta = answer.get("metadata") or {}
    held = meta.get("finalizers") or (answer.get("spec") or {}).get("finalizers")  # a Namespace's are in spec
    return answer if meta.get("deletionTimestamp") and held else None


def selector_within(scope: str | None, query: str | None) -> bool:
    """True when every object ``query`` selects is also selected by ``scope`` (the informer's selector):
    each of the scope's terms is one of the query's, or an existence the query's ``k=v`` implies."""
    wanted = _terms(query)
    return all(t in wanted or (_is_key(t) and any(q.startswith(t + "=") for q in wanted)) for t in _terms(scope))


def _is_key(term: str) -> bool:
    """An existence term (``k``): no operator in it."""
    return not any(op in term for op in ("=", "!", " "))


def _fields_match(fields: str | None, meta: dict[str, Any]) -> bool:
    """Field selectors the operator uses: ``metadata.name=<name>``."""
    for term in _terms(fields):
        key, _, value = term.partition("=")
        if key == "metadata.name" and meta.get("name") != value:
            return False
    return True
