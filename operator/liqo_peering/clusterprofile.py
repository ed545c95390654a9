"""ClusterProfiles (SIG-Multicluster's cluster inventory, KEP-4322) and their access providers (KEP-5339).

The operator's administrator names the access providers the operator may use in a provider file
(``--clusterprofile-provider-file``, the JSON that sigs.k8s.io/cluster-inventory-api's ``access`` package
reads): each a name and the exec plugin that gives a credential for a cluster of that provider. A
ClusterProfile lists, in its status, the access providers it can be reached through, each with the cluster
(server, CA, proxy, extensions) to reach. The first provider of the file (in file order) that the ClusterProfile
offers is used: its cluster, vetted like any remote kubeconfig (kubeconfig.py), and the administrator's exec
plugin as the user. The plugin gets the ``client.authentication.k8s.io/exec`` extension as its ExecCredential's
``spec.cluster.config``; the extensions that add arguments and environment variables are used only as the
administrator's policy for that provider allows (default: ignored).

Everything a ClusterProfile's author writes is read within bounds, and every refusal is a typed error whose
message names fields, never values. Pure: no I/O here (clients/execplugin.py runs the plugin).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from liqo_peering.errors import ClusterProfileUnhealthy, NoAccessProvider
from liqo_peering.kubeconfig import KubeconfigError, KubeconfigInvalid, RemoteKubeconfig, load_remote_kubeconfig

PROVIDER_FILE_FLAG = "--clusterprofile-provider-file"
GROUP, VERSION, PLURAL, KIND = "multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile"
HEALTHY = "ControlPlaneHealthy"
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
ARGS_POLICIES = ("Ignore", "Append")
ENVS_POLICIES = ("Ignore", "AppendIfNotExists", "Replace")

# The provider file: a few providers of a few lines each.
MAX_FILE_BYTES = 64 * 1024
MAX_FILE_DEPTH = 8
MAX_PROVIDERS = 32
MAX_ARGS = 64
MAX_ENV = 64
MAX_STRING = 4096
# A ClusterProfile, written by whoever registers clusters: how much of it is looked at.
MAX_OFFERED = 64  # entries of status.accessProviders (and of the deprecated credentialProviders)
MAX_CONDITIONS = 64
MAX_CLUSTER_BYTES = 64 * 1024  # one access provider's cluster entry, its extensions included, as JSON
MAX_PROFILE_ARGS = 32
MAX_PROFILE_ENVS = 32
MAX_SHOWN = 200  # characters of a ClusterProfile's own text (a condition's message) shown in a message
# The fields of a cluster entry kept for the kubeconfig (those the client uses, and certificate-authority, which
# the vetting refuses by name); the extensions are read here.
_CLUSTER_FIELDS = (
    "server",
    "certificate-authority-data",
    "certificate-authority",
    "proxy-url",
    "tls-server-name",
    "insecure-skip-tls-verify",
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables a ClusterProfile may never set for a plugin: its input, and what changes how any program loads.
_RESERVED_ENV = re.compile(r"^(KUBERNETES_EXEC_INFO|LD_.*|PATH)$")


class ProviderFileError(ValueError):
    """The provider file cannot be used: the operator does not start, and says why."""


@dataclass(frozen=True)
class ExecConfig:
    """An access provider's plugin, as the administrator wrote it (client-go's ExecConfig)."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    provide_cluster_info: bool = False


@dataclass(frozen=True)
class AccessProvider:
    name: str
    exec: ExecConfig
    args_policy: str = "Ignore"
    envs_policy: str = "Ignore"


@dataclass(frozen=True)
class AccessProviders:
    """The providers of the operator's provider file, in file order; none without one."""

    providers: tuple[AccessProvider, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.providers)


# -- the provider file ------------------------------------------------------------------------------------
def load_provider_file(raw: bytes, source: str) -> AccessProviders:
    """The access providers of a provider file, read within bounds; ``ProviderFileError`` names the problem."""
    if len(raw) > MAX_FILE_BYTES:
        raise ProviderFileError(f"{source}: larger than {MAX_FILE_BYTES} bytes; list only the access providers")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ProviderFileError(f"{source}: not JSON{where}") from None
    if _depth(doc) > MAX_FILE_DEPTH:
        raise ProviderFileError(f"{source}: nests deeper than {MAX_FILE_DEPTH} levels")
    if not isinstance(doc, dict) or set(doc) - {"providers"}:
        raise ProviderFileError(f'{source}: must be an object with one field, "providers"')
    items = doc.get("providers")
    if not isinstance(items, list) or not items:
        raise ProviderFileError(f'{source}: "providers" must be a list of at least one access provider')
    if len(items) > MAX_PROVIDERS:
        raise ProviderFileError(f"{source}: more than {MAX_PROVIDERS} access providers")
    providers = [_provider(item, f"{source}: providers[{i}]") for i, item in enumerate(items)]
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise ProviderFileError(f"{source}: two access providers have the same name")
    return AccessProviders(tuple(providers))


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return 1 + max((_depth(v) for v in node), default=0)
    return 0


def _string(value: Any, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value) > MAX_STRING:
        raise ProviderFileError(f"{where}: must be a string of 1 to {MAX_STRING} characters")
    return value


def _provider(item: Any, where: str) -> AccessProvider:
    known = {"name", "execConfig", "profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy"}
    if not isinstance(item, dict) or set(item) - known:
        raise ProviderFileError(f"{where}: must be an object with the fields {', '.join(sorted(known))}")
    name = _string(item.get("name"), f"{where}.name")
    args_policy = item.get("profileSourcedCLIArgsPolicy") or "Ignore"
    if args_policy not in ARGS_POLICIES:
        raise ProviderFileError(f"{where}.profileSourcedCLIArgsPolicy: one of {', '.join(ARGS_POLICIES)}")
    envs_policy = item.get("profileSourcedEnvVarsPolicy") or "Ignore"
    if envs_policy not in ENVS_POLICIES:
        raise ProviderFileError(f"{where}.profileSourcedEnvVarsPolicy: one of {', '.join(ENVS_POLICIES)}")
    return AccessProvider(name, _exec_config(item.get("execConfig"), f"{where}.execConfig"), args_policy, envs_policy)


def _exec_config(config: Any, where: str) -> ExecConfig:
    # interactiveMode is always Never here (no terminal), installHint is for people: both read and let be.
    known = {"apiVersion", "command", "args", "env", "provideClusterInfo", "interactiveMode", "installHint"}
    if not isinstance(config, dict) or set(config) - known:
        raise ProviderFileError(f"{where}: must be an object with the fields {', '.join(sorted(known))}")
    api_version = config.get("apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ProviderFileError(f"{where}.apiVersion: one of {', '.join(EXEC_API_VERSIONS)}")
    args = config.get("args") or []
    if not isinstance(args, list) or len(args) > MAX_ARGS:
        raise ProviderFileError(f"{where}.args: a list of at most {MAX_ARGS} strings")
    env = config.get("env") or []
    if not isinstance(env, list) or len(env) > MAX_ENV:
        raise ProviderFileError(f"{where}.env: a list of at most {MAX_ENV} name and value pairs")
    pairs = []
    for i, var in enumerate(env):
        if not isinstance(var, dict) or set(var) != {"name", "value"}:
            raise ProviderFileError(f"{where}.env[{i}]: an object with a name and a value")
        pairs.append(
            (
                _string(var["name"], f"{where}.env[{i}].name"),
                _string(var["value"], f"{where}.env[{i}].value", empty=True),
            )
        )
    provide = config.get("provideClusterInfo", False)
    if not isinstance(provide, bool):
        raise ProviderFileError(f"{where}.provideClusterInfo: true or false")
    return ExecConfig(
        api_version=str(api_version),
        command=_string(config.get("command"), f"{where}.command"),
        args=tuple(_string(a, f"{where}.args[{i}]", empty=True) for i, a in enumerate(args)),
        env=tuple(pairs),
        provide_cluster_info=provide,
    )


# -- a ClusterProfile ---------------------------------------------------------------------------------------
def _shown(value: Any) -> str:
    """A ClusterProfile's own text in a message: a string, cut short (the caller redacts the message)."""
    text = value if isinstance(value, str) else ""
    return text[:MAX_SHOWN] + ("..." if len(text) > MAX_SHOWN else "")


def _status(profile: dict[str, Any]) -> dict[str, Any]:
    status = profile.get("status")
    return status if isinstance(status, dict) else {}


def check_health(profile: dict[str, Any], where: str) -> None:
    """``ClusterProfileUnhealthy`` unless the ClusterProfile's ControlPlaneHealthy condition is True."""
    conditions = _status(profile).get("conditions")
    found = None
    for condition in (conditions if isinstance(conditions, list) else [])[:MAX_CONDITIONS]:
        if isinstance(condition, dict) and condition.get("type") == HEALTHY:
            found = condition
            break
    if found is not None and found.get("status") == "True":
        return
    if found is None:
        said = f"has no {HEALTHY} condition"
    else:
        reason, message = _shown(found.get("reason")), _shown(found.get("message"))
        said = f"says {HEALTHY} is {_shown(found.get('status')) or 'unset'}"
        said += f" ({reason}{': ' if reason and message else ''}{message})" if reason or message else ""
    raise ClusterProfileUnhealthy(
        f"{where} {said}; the provider is not peered with until its cluster manager reports its control plane"
        f" healthy ({HEALTHY} True), which resumes the peering by itself"
    )


def offered(profile: dict[str, Any]) -> dict[str, Any]:
    """The access providers a ClusterProfile offers, by name: status.accessProviders, over the deprecated
    status.credentialProviders (as the upstream library reads them)."""
    status = _status(profile)
    found: dict[str, Any] = {}
    for field in ("credentialProviders", "accessProviders"):
        entries = status.get(field)
        for entry in (entries if isinstance(entries, list) else [])[:MAX_OFFERED]:
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and 0 < len(name) <= 253:
                found[name] = entry.get("cluster")
    return found


def choose(providers: AccessProviders, profile: dict[str, Any], where: str) -> tuple[AccessProvider, Any]:
    """The first provider of the file that the ClusterProfile offers, and the cluster it offers with it."""
    offers = offered(profile)
    if not providers.providers:
        raise NoAccessProvider(
            f"{where}: the operator has no access providers: its administrator gives them with"
            f" {PROVIDER_FILE_FLAG} (the chart's clusterProfiles values)"
        )
    for provider in providers.providers:
        if provider.name in offers:
            return provider, offers[provider.name]
    listed = ", ".join(sorted(n[:63] for n in offers)[:10]) or "none"
    raise NoAccessProvider(
        f"{where} offers no access provider the operator has (it offers: {listed}; the operator's:"
        f" {', '.join(providers.names)}); add one of them to status.accessProviders, or the operator's provider"
        f" file ({PROVIDER_FILE_FLAG})"
    )


def profile_kubeconfig(
    providers: AccessProviders,
    profile: dict[str, Any],
    where: str,
    *,
    allow_insecure_tls: bool,
    healthy: bool = True,
) -> RemoteKubeconfig:
    """The kubeconfig a ClusterProfile's access provider gives: its cluster, vetted as a remote kubeconfig's,
    and the administrator's plugin as its user. ``where`` names the ClusterProfile in messages; ``healthy``:
    refuse it unless its control plane is healthy."""
    if healthy:
        check_health(profile, where)
    provider, cluster = choose(providers, profile, where)
    at = f"{where}, access provider {provider.name!r}"
    if not isinstance(cluster, dict):
        raise KubeconfigInvalid(f"{at}: its cluster must be an object with a server")
    try:
        size = len(json.dumps(cluster))
    except (ValueError, RecursionError):
        size = MAX_CLUSTER_BYTES + 1
    if size > MAX_CLUSTER_BYTES:
        raise KubeconfigInvalid(f"{at}: its cluster is larger than {MAX_CLUSTER_BYTES} bytes")
    extensions = _extensions(cluster.get("extensions"), at)
    kept = {k: cluster[k] for k in _CLUSTER_FIELDS if k in cluster}
    proxy = kept.get("proxy-url")
    if proxy is not None and (not isinstance(proxy, str) or not re.match(r"^(https?|socks5h?)://[^\s]+$", proxy)):
        raise KubeconfigInvalid(f"{at}: its cluster's proxy-url must be an http://, https:// or socks5:// URL")
    if EXEC_EXTENSION in extensions:
        kept["extensions"] = [{"name": EXEC_EXTENSION, "extension": extensions[EXEC_EXTENSION]}]
    exec_config = _with_profile_sources(provider, extensions, at)
    user = {
        "exec": {
            "apiVersion": exec_config.api_version,
            "command": exec_config.command,
            "args": list(exec_config.args),
            "env": [{"name": n, "value": v} for n, v in exec_config.env],
            "interactiveMode": "Never",
            "provideClusterInfo": exec_config.provide_cluster_info,
        }
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": provider.name, "cluster": kept}],
        "users": [{"name": provider.name, "user": user}],
        "contexts": [{"name": provider.name, "context": {"cluster": provider.name, "user": provider.name}}],
        "current-context": provider.name,
    }
    try:
        vetted = load_remote_kubeconfig(
            json.dumps(doc), context=None, allow_exec=True, allow_insecure_tls=allow_insecure_tls
        )
    except KubeconfigError as exc:  # the same rules as a Secret's kubeconfig: say whose cluster it is
        raise exc.restated(f"{at}: {exc.message}") from None
    return RemoteKubeconfig(
        config=vetted.config, server=vetted.server, context_name=vetted.context_name, access_provider=provider.name
    )


def _extensions(value: Any, at: str) -> dict[str, Any]:
    """A cluster's named extensions (kubeconfig's ``[{name, extension}]``), by name."""
    if value is None:
        return {}
    if not isinstance(value, list) or len(value) > MAX_OFFERED:
        raise KubeconfigInvalid(f"{at}: its cluster's extensions must be a list of at most {MAX_OFFERED} entries")
    found: dict[str, Any] = {}
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise KubeconfigInvalid(f"{at}: each of its cluster's extensions needs a name and an extension")
        found[entry["name"]] = entry.get("extension")
    return found


def _with_profile_sources(provider: AccessProvider, extensions: dict[str, Any], at: str) -> ExecConfig:
    """The administrator's plugin with what the ClusterProfile adds to its arguments and environment, as far
    as the administrator's policies allow it."""
    config = provider.exec
    args, env = list(config.args), dict(config.env)
    added_args = extensions.get(ARGS_EXTENSION)
    if added_args is not None and provider.args_policy == "Append":
        if (
            not isinstance(added_args, list)
            or len(added_args) > MAX_PROFILE_ARGS
            or not all(isinstance(a, str) and len(a) <= MAX_STRING for a in added_args)
        ):
            raise KubeconfigInvalid(
                f"{at}: extension {ARGS_EXTENSION} must be a list of at most {MAX_PROFILE_ARGS} strings"
            )
        args += added_args
    added_env = extensions.get(ENVS_EXTENSION)
    if added_env is not None and provider.envs_policy != "Ignore":
        if not isinstance(added_env, dict) or len(added_env) > MAX_PROFILE_ENVS:
            raise KubeconfigInvalid(
                f"{at}: extension {ENVS_EXTENSION} must map at most {MAX_PROFILE_ENVS} variable names to values"
            )
        for name, value in added_env.items():
            if (
                not _ENV_NAME.match(name)
                or _RESERVED_ENV.match(name)
                or not isinstance(value, str)
                or len(value) > MAX_STRING
            ):
                raise KubeconfigInvalid(
                    f"{at}: extension {ENVS_EXTENSION} may set only variables named like SOME_NAME to strings, and"
                    " never KUBERNETES_EXEC_INFO, PATH or LD_*"
                )
            if provider.envs_policy == "Replace" or name not in env:
                env[name] = value
    return ExecConfig(config.api_version, config.command, tuple(args), tuple(env.items()), config.provide_cluster_info)


def exec_cluster(kubeconfig: RemoteKubeconfig) -> dict[str, Any]:
    """What the plugin is told of its cluster (ExecCredential ``spec.cluster``): the server, its CA, proxy and TLS
    name, and the exec extension as ``config``."""
    cluster = kubeconfig.config["clusters"][0]["cluster"]
    told = {
        k: cluster[k] for k in ("server", "certificate-authority-data", "proxy-url", "tls-server-name") if k in cluster
    }
    if cluster.get("insecure-skip-tls-verify") is True:
        told["insecure-skip-tls-verify"] = True
    for extension in cluster.get("extensions") or []:
        if extension.get("name") == EXEC_EXTENSION:
            told["config"] = extension.get("extension")
    return told


def exec_config(kubeconfig: RemoteKubeconfig) -> ExecConfig:
    """The plugin of a ClusterProfile's kubeconfig, as ``profile_kubeconfig`` wrote it."""
    raw = kubeconfig.config["users"][0]["user"]["exec"]
    return ExecConfig(
        api_version=raw["apiVersion"],
        command=raw["command"],
        args=tuple(raw.get("args") or ()),
        env=tuple((e["name"], e["value"]) for e in raw.get("env") or ()),
        provide_cluster_info=bool(raw.get("provideClusterInfo")),
    )
