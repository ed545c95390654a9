"""The check over every tier's part: each grant of each install's RBAC used by a request of that install, but
the EXCEPTIONS; no request of the operator refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from testenv.rbacproof import collect, installs
from testenv.rbacproof.grants import describe, grants_of

Key = tuple[str, str, str, str, str]

# Grants that no request can show, and why: (verb, apiGroup, resource) -> reason. Keep it short.
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("bind", "rbac.authorization.k8s.io", "clusterroles"): (
        "the API server checks it when the operator creates its RoleBinding to the tenant-access ClusterRole;"
        " no request has that verb"
    ),
    ("update", "peering.liqo-operator.io", "liqopeerings/finalizers"): (
        "checked by the OwnerReferencesPermissionEnforcement admission plugin on an owner reference with"
        " blockOwnerDeletion, not a request; that plugin is off in the suite's API servers"
    ),
    ("update", "peering.liqo-operator.io", "liqopeeringsets/finalizers"): (
        "checked by the OwnerReferencesPermissionEnforcement admission plugin on an owner reference with"
        " blockOwnerDeletion, not a request; that plugin is off in the suite's API servers"
    ),
}

# Reads by name that an informer of the kind serves: the operator's own LiqoPeerings (engine/duplicate.py,
# engine/sweep.py) and the consumer's Liqo kinds, the virtual Nodes and the gateways' Deployments
# (engine/watches.py, most started with the operator): a run that goes well may never send one.
# tests/unit/test_watches.py keeps it to kinds watched.
CACHED_READS = (
    ("peering.liqo-operator.io", "liqopeerings"),
    ("core.liqo.io", "foreignclusters"),
    ("authentication.liqo.io", "identities"),
    ("authentication.liqo.io", "resourceslices"),
    ("authentication.liqo.io", "tenants"),
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayclients"),
    ("networking.liqo.io", "gatewayservers"),
    ("networking.liqo.io", "publickeies"),
    ("offloading.liqo.io", "virtualnodes"),
    ("", "nodes"),
    ("apps", "deployments"),
)
CACHED_READ = (
    "a read by name that the kind's informer could not serve: before it has synced or after a watch failure, or"
    " an object newer than its last event; a run whose informers were all synced may never send one"
)
EXCEPTIONS.update({("get", group, resource): CACHED_READ for group, resource in CACHED_READS})

# The same, for a grant limited to one name: the nonce Secrets, which informers watching that name alone serve
# (engine/watches.py: the signed nonces from the start, the reverse direction's nonce). Held once that watch
# was seen.
NAMED_CACHED_READS = (("", "secrets", "liqo-signed-nonce"), ("", "secrets", "liqo-nonce"))
NAMED_EXCEPTIONS: dict[tuple[str, str, str, str], str] = {
    ("get", group, resource, name): CACHED_READ for group, resource, name in NAMED_CACHED_READS
}

# An exception holds only once the request that makes the API server check it was seen: `bind` is checked on
# the RoleBinding's creation (a server-side apply answered 201); a cached read, once the informer's watch was.
EVIDENCE: dict[tuple[str, str, str], tuple[str, str, str]] = {
    ("bind", "rbac.authorization.k8s.io", "clusterroles"): ("create", "rbac.authorization.k8s.io", "rolebindings"),
    # The informer whose cache served the reads ran: its watch was seen.
    **{("get", group, resource): ("watch", group, resource) for group, resource in CACHED_READS},
}


@dataclass
class Report:
    parts: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)  # installs whose ServiceAccount made requests
    idle: list[str] = field(default_factory=list)  # installs whose operator never ran (no kubelet, a failed install)
    unused: dict[Key, set[str]] = field(default_factory=dict)  # grant -> the installs that granted it
    excepted: dict[Key, str] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.unused or self.forbidden or self.errors)

    def lines(self) -> list[str]:
        out = [f"rbac: parts {', '.join(self.parts) or 'none'}; {len(self.ran)} installs ran the operator"]
        out += [f"  install {n}: {label}" for n, label in enumerate(self.ran, 1)]
        out += [f"  excepted: {describe(k)}: {why}" for k, why in sorted(self.excepted.items())]
        number = {label: n for n, label in enumerate(self.ran, 1)}
        for key, labels in sorted(self.unused.items()):
            which = ", ".join(str(n) for n in sorted(number[x] for x in labels))
            out.append(f"  UNUSED: {describe(key)} (installs {which})")
        out += [f"  FORBIDDEN: {f}" for f in sorted(self.forbidden)]
        out += [f"  ERROR: {e}" for e in self.errors]
        return out


def check(paths: list[Path]) -> Report:
    report = Report(parts=[p.stem for p in paths])
    granted: dict[Key, set[str]] = {}
    used: set[Key] = set()
    for path in paths:
        found, errors = collect.load(path)
        report.errors += [f"{path.stem}: {e}" for e in errors]
        for index, install in enumerate(found, 1):
            values = tuple((flag, value) for flag, value in install["values"])
            label = f"{path.stem}#{index} {install['cluster']} {install['release']} in {install['namespace']}: " + (
                " ".join(value if flag != "--values" else "<values file>" for flag, value in values) or "defaults"
            )
            if install.get("afterUninstall"):
                label += f" ({install['afterUninstall']} requests after its uninstall left out)"
            if install.get("refusedNotByRbac"):
                label += f" ({install['refusedNotByRbac']} refusals by admission or a restarting API server left out)"
            requests = collect.requests_of(install)
            if not requests or install["serviceAccount"] is None:
                report.idle.append(label)
                continue
            report.ran.append(label)
            report.forbidden |= {f"{install['serviceAccount']}: {r.describe()}" for r in requests if r.forbidden}
            grants = grants_of(
                installs.render(install["release"], install["namespace"], values), install["serviceAccount"]
            )
            for grant in grants:
                granted.setdefault(grant.key, set()).add(label)
                if any(grant.allows(r) for r in requests):
                    used.add(grant.key)
    seen = {(verb, group, resource) for _, verb, group, resource, _ in used}
    seen_named = {(verb, group, resource, name) for _, verb, group, resource, name in used}
    for key, labels in granted.items():
        _, verb, group, resource, name = key
        if key in used:
            continue
        evidence = EVIDENCE.get((verb, group, resource))
        if (verb, group, resource) in EXCEPTIONS and (evidence is None or evidence in seen):
            report.excepted[key] = EXCEPTIONS[verb, group, resource]
        elif (verb, group, resource, name) in NAMED_EXCEPTIONS and ("watch", group, resource, name) in seen_named:
            report.excepted[key] = NAMED_EXCEPTIONS[verb, group, resource, name]
        else:
            report.unused[key] = labels
    return report
