"""Real Kubernetes control planes (etcd + kube-apiserver + kube-controller-manager) as local processes.

    from testenv.localk8s import LocalCluster, start_clusters, tool_path

Binaries come from the cache filled by `make tools` (hack/build-tools.sh).
CLI: python -m testenv.localk8s up|down --dir DIR [NAMES...]
"""

from .cluster import ClusterStartError, LocalCluster, start_clusters
from .tools import ToolMissingError, tool_path

__all__ = ["ClusterStartError", "LocalCluster", "ToolMissingError", "start_clusters", "tool_path"]
