"""The chart's installs the tests make: noted from `helm install|upgrade` (testenv.helm.run_helm) or, for a
release another controller installs (Flux's HelmRelease), by the test; rendered again with `helm template`."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "liqo-peering-operator"
CHART_NAME = CHART.name
VALUE_FLAGS = ("--set", "--set-string", "--set-json", "-f", "--values")
# helm's flags that take a value (as `--flag value`), so that they are not read as the release or the chart.
TAKES_VALUE = {
    *VALUE_FLAGS,
    "-n",
    "--namespace",
    "--version",
    "--timeout",
    "--ca-file",
    "--cert-file",
    "--key-file",
    "--kube-context",
    "--kubeconfig",
    "--kube-version",
    "--description",
    "--repo",
    "--username",
    "--password",
    "--post-renderer",
    "--set-file",
}


@dataclass(frozen=True)
class Install:
    cluster: str  # the kubeconfig it went to (a cluster's is in its workdir)
    release: str
    namespace: str
    values: tuple[tuple[str, str], ...]  # ("--set", "a=b"), ("--values", <the file's YAML>)
    at: datetime

    def label(self) -> str:
        return " ".join(f"{flag} {value}" if flag != "--values" else "--values <file>" for flag, value in self.values)

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "namespace": self.namespace, "values": [list(v) for v in self.values]}


_noted: list[Install] = []
# `helm uninstall`s: (cluster, release, namespace, when). The RBAC goes while the Pods still terminate.
_uninstalled: list[tuple[str, str, str, datetime]] = []


def note(install: Install) -> None:
    _noted.append(install)


def noted_on(workdir: Path) -> list[Install]:
    return [i for i in _noted if Path(i.cluster).is_relative_to(workdir)]


def _is_chart(ref: str) -> bool:
    if ref.startswith("oci://"):
        return ref.rstrip("/").rsplit("/", 1)[-1] == CHART_NAME
    if ref.endswith(".tgz"):
        return Path(ref).name.startswith(f"{CHART_NAME}-")
    return Path(ref).resolve() == CHART


def from_helm_args(args: tuple[str, ...], kubeconfig: Path | str | None) -> Install | None:
    """The install an `install|upgrade` of the chart makes; None for any other helm command."""
    if not args or args[0] not in ("install", "upgrade") or kubeconfig is None:
        return None
    positional: list[str] = []
    values: list[tuple[str, str]] = []
    namespace = "default"
    rest = iter(args[1:])
    for arg in rest:
        flag, eq, inline = arg.partition("=")
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        if flag not in TAKES_VALUE:
            continue
        value = inline if eq else next(rest, "")
        if flag in ("-n", "--namespace"):
            namespace = value
        elif flag in ("-f", "--values"):
            values.append(("--values", Path(value).read_text()))
        elif flag in VALUE_FLAGS:
            values.append((flag, value))
    if len(positional) < 2 or not _is_chart(positional[1]):
        return None
    release, cluster = positional[0], str(Path(kubeconfig).resolve())
    if "--reuse-values" in args:
        earlier = [i for i in _noted if (i.cluster, i.release, i.namespace) == (cluster, release, namespace)]
        if earlier:
            values = [*earlier[-1].values, *values]
    return Install(cluster, release, namespace, tuple(values), datetime.now(UTC))


def note_helm(args: tuple[str, ...], kubeconfig: Path | str | None) -> None:
    install = from_helm_args(args, kubeconfig)
    if install is not None:
        note(install)
    elif args[:1] == ("uninstall",) and len(args) > 1 and kubeconfig is not None:
        namespace = next((args[i + 1] for i in range(len(args) - 1) if args[i] in ("-n", "--namespace")), "default")
        note_uninstall(kubeconfig, args[1], namespace)


def note_uninstall(kubeconfig: Path | str, release: str, namespace: str) -> None:
    """A release uninstalled now: by `helm uninstall`, or by another controller (a HelmRelease deleted)."""
    _uninstalled.append((str(Path(kubeconfig).resolve()), release, namespace, datetime.now(UTC)))


def uninstalled_between(install: Install, start: datetime, end: datetime) -> bool:
    """Whether the release of `install` was uninstalled between `start` and `end`."""
    return any(
        (cluster, release, namespace) == (install.cluster, install.release, install.namespace) and start <= at <= end
        for cluster, release, namespace, at in _uninstalled
    )


def note_values(kubeconfig: Path | str, release: str, namespace: str, values: dict[str, Any]) -> None:
    """A release another controller installs from the chart with `values` (a HelmRelease's spec.values)."""
    cluster = str(Path(kubeconfig).resolve())
    note(Install(cluster, release, namespace, (("--values", yaml.safe_dump(values)),), datetime.now(UTC)))


@cache
def render(release: str, namespace: str, values: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """The chart's objects for these values (`helm template`)."""
    from testenv.helm import PLACEHOLDER_REPOSITORY, run_helm  # testenv.helm notes installs through this module

    args = ["template", release, str(CHART), "--namespace", namespace]
    with tempfile.TemporaryDirectory(prefix="rbacproof-") as tmp:
        # The committed chart names no image, and an install of a packaged chart (a release) sets none on the
        # command line: the placeholder, as the first values file, so that the install's own values override
        # it. The RBAC does not depend on the image.
        placeholder = Path(tmp) / "placeholder-image.yaml"
        placeholder.write_text(yaml.safe_dump({"image": {"repository": PLACEHOLDER_REPOSITORY}}))
        args += ["--values", str(placeholder)]
        for index, (flag, value) in enumerate(values):
            if flag == "--values":
                path = Path(tmp) / f"values-{index}.yaml"
                path.write_text(value)
                value = str(path)
            args += [flag, value]
        return [d for d in yaml.safe_load_all(run_helm(*args)) if d]
