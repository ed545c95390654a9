"""Files of other projects' Go modules at pinned versions (hack/versions.env), from the Go module cache,
downloaded through the Go module proxy when absent: never copied into this repository."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testenv.localk8s.tools import read_versions

Obj = dict[str, Any]


def module_dir(module: str, version: str) -> Path:
    """The unpacked module ``module@version`` in the Go module cache."""
    cache = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True).stdout.strip()
    path = Path(cache) / f"{module}@{version}"
    if not path.is_dir():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["go", "mod", "init", "upstream"], cwd=tmp, check=True, capture_output=True)
            out = subprocess.run(
                ["go", "mod", "download", "-json", f"{module}@{version}"],
                cwd=tmp,
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            ).stdout
            path = Path(json.loads(out)["Dir"])
    return path


def cluster_api_crd(plural: str = "clusters") -> Obj:
    """A CRD of Cluster API (cluster.x-k8s.io) at CLUSTER_API_VERSION, as its config/crd/bases has it."""
    version = "v" + read_versions()["CLUSTER_API_VERSION"].lstrip("v")
    crd = (
        module_dir("sigs.k8s.io/cluster-api", version) / "config" / "crd" / "bases" / f"cluster.x-k8s.io_{plural}.yaml"
    )
    loaded: Obj = yaml.safe_load(crd.read_text())
    return loaded
