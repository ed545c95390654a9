"""The test environment of liqo-peering-operator, a package apart from the code it tests.

- `testenv.kube`: the one raw REST client of the harness (dict in, dict out); `testenv.wait`: polling;
- `testenv.audit`: the local API servers' audit logs (every write) read back, e.g. to count the operator's;
- `testenv.localk8s`: real etcd + kube-apiserver + kube-controller-manager as local processes, and
  optionally real nodes (containerd, kubelet, kube-proxy, CoreDNS) in network namespaces
  (`python -m testenv.localk8s up [--nodes]|down|load`);
- `testenv.helm`: helm from the tool cache;
- `testenv.liqo_env`: Liqo's CRDs and chart objects rendered from its Helm chart and applied;
- `testenv.standin`: a stand-in for Liqo's controllers (`python -m testenv.standin`);
- `testenv.liqo_real`: Liqo's real control-plane binaries as local processes (`python -m testenv.liqo_real`);
- `testenv.operator_support`: the operator as a process, LiqoPeering helpers.

It never imports `liqo_peering`: what it needs of the operator (its CRD) it reads from `crds/`.
"""
