"""Every request one client makes, by verb and cluster, read from the API servers' own counters.

The audit logs hold writes only, and `apiserver_request_total` has no label for the client. But API
Priority and Fairness counts requests per FlowSchema (`apiserver_flowcontrol_dispatched_requests_total`), and
a FlowSchema can match one user and one verb. So each contender runs as a user of its own (a client
certificate bound to cluster-admin), and one FlowSchema per verb, all on the `exempt` priority level (no
queueing: it is served exactly as system:masters is), counts its requests, reads and watches included.
"""

from __future__ import annotations

import re
import time
from collections import Counter

from testenv import kube as k
from testenv.kube import Kube

FLOWSCHEMA = k.Res("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", namespaced=False)
CLUSTERROLEBINDING = k.Res("rbac.authorization.k8s.io", "v1", "clusterrolebindings", namespaced=False)
# Most specific first; "other" catches the rest, non-resource requests (discovery, /version) included.
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "other")
MANAGER = "liqo-peering-bench"
_DISPATCHED = re.compile(r'^apiserver_flowcontrol_dispatched_requests_total\{flow_schema="([^"]+)"[^}]*\} (\S+)$')


def _schema(user: str, verb: str) -> str:
    return f"bench-{user}-{verb}"


def install_counters(kc: Kube, user: str) -> None:
    """Let `user` do anything (cluster-admin) and count its requests per verb; waits until they count."""
    kc.apply(
        CLUSTERROLEBINDING,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"bench-{user}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
        },
        MANAGER,
    )
    for precedence, verb in enumerate(VERBS, start=100):  # before every default schema but the exempt ones
        verbs = ["*"] if verb == "other" else [verb]
        kc.apply(
            FLOWSCHEMA,
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": _schema(user, verb)},
                "spec": {
                    "matchingPrecedence": precedence,
                    "priorityLevelConfiguration": {"name": "exempt"},
                    "rules": [
                        {
                            "subjects": [{"kind": "User", "user": {"name": user}}],
                            "resourceRules": [
                                {
                                    "verbs": verbs,
                                    "apiGroups": ["*"],
                                    "resources": ["*"],
                                    "clusterScope": True,
                                    "namespaces": ["*"],
                                }
                            ],
                            "nonResourceRules": [{"verbs": verbs, "nonResourceURLs": ["*"]}],
                        }
                    ],
                },
            },
            MANAGER,
        )
    # The API server's flow-control controller marks each schema (condition Dangling) once it uses it.
    deadline = time.monotonic() + 30
    while True:
        schemas = [kc.get(FLOWSCHEMA, _schema(user, verb)) for verb in VERBS]
        if all((s or {}).get("status", {}).get("conditions") for s in schemas):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"FlowSchemas for {user} not picked up by the API server")
        time.sleep(0.2)


def counts(kc: Kube, user: str) -> Counter[str]:
    """Requests `user` made so far on this API server, per verb (since the API server started)."""
    out: Counter[str] = Counter()
    names = {_schema(user, verb): verb for verb in VERBS}
    for line in kc.get_text("/metrics").splitlines():
        m = _DISPATCHED.match(line)
        if m and m.group(1) in names:
            out[names[m.group(1)]] += int(float(m.group(2)))
    return out
