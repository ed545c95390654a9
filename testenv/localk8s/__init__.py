"""Real Kubernetes control planes (etcd + kube-apiserver + kube-controller-manager) as local processes,
optionally with real nodes (`start_clusters(names, base_dir, nodes=1)`: see docs/development/testing.md).

    from testenv.localk8s import LocalCluster, start_clusters, tool_path

Binaries come from the cache filled by `make tools` (hack/build-tools.sh).
CLI: python -m testenv.localk8s up|down|load --dir DIR [--nodes N] [NAMES...|ARCHIVES...]
"""

from .cluster import ClusterStartError, LocalCluster, start_clusters
from .tools import ToolMissingError, tool_path

__all__ = ["ClusterStartError", "LocalCluster", "ToolMissingError", "start_clusters", "tool_path"]
