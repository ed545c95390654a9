{{/*
Rules the operator needs where LiqoPeerings and LiqoPeeringSets live: in the ClusterRole when it watches all namespaces,
otherwise in a Role in each namespace of .Values.watchNamespaces.
*/}}
{{- define "liqo-peering-operator.peeringRules" -}}
# Reconcile LiqoPeerings: watch them, add/remove the operator's finalizer and annotations (patch).
# LiqoPeeringSets create, update (their template, a PUT with the resourceVersion read) and delete the
# LiqoPeerings they own.
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeerings"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Report progress: status.peerStatus, conditions, observedGeneration (kopf and the operator patch it).
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeerings/status"]
  verbs: ["patch"]
# Own objects with blockOwnerDeletion (OwnerReferencesPermissionEnforcement checks this subresource).
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeerings/finalizers"]
  verbs: ["update"]
# Reconcile LiqoPeeringSets: watch them, the operator's finalizer and annotations, their status; and own
# their LiqoPeerings with blockOwnerDeletion (the finalizers subresource).
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeeringsets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeeringsets/status"]
  verbs: ["patch"]
- apiGroups: ["peering.liqo-operator.io"]
  resources: ["liqopeeringsets/finalizers"]
  verbs: ["update"]
# Events on each LiqoPeering and LiqoPeeringSet: the operator and kopf only create core/v1 Events.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
# Read the provider kubeconfig Secrets that LiqoPeerings reference (spec.remoteKubeconfigSecretRef);
# watched so that a rotated kubeconfig is picked up, and a LiqoPeeringSet's selection follows their labels.
# With kubeconfigSecretProtection, patched to add and remove the operator's finalizer (kubeconfig-in-use).
# With credentialsMinting, for spec.credentials.mint: the minted kubeconfig's Secret is created, patched
# (each step of a minting, and renewals) and deleted at unpeering, and the bootstrap Secret deleted with
# deleteBootstrapSecret; the data of the Secrets users make is never written.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"{{ if or .Values.kubeconfigSecretProtection .Values.credentialsMinting }}, "patch"{{ end }}{{ if .Values.credentialsMinting }}, "create", "delete"{{ end }}]
{{- if .Values.clusterAPI.enabled }}
# LiqoPeeringSets with spec.source Cluster: the Cluster API Clusters their selector picks, listed and
# watched by label; their kubeconfig Secrets are read through the Secret rule above.
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters"]
  verbs: ["list", "watch"]
{{- end }}
{{- if .Values.clusterProfiles.enabled }}
# ClusterProfiles that LiqoPeerings reference (spec.remoteClusterProfileRef): read by name, and listed and
# watched by name (a metadata.name field selector), so that a change of their status or their deletion wakes
# the peering. Read only: a ClusterProfile holds no credential, only where and through which access
# provider a cluster is reached.
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["clusterprofiles"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- if and .Values.ha.enabled .Values.watchNamespaces }}
# HA: kopf peering between replicas, namespaced flavour (kopf uses it when watchNamespaces is set): watched,
# and its own entry patched in.
- apiGroups: ["kopf.dev"]
  resources: ["kopfpeerings"]
  verbs: ["list", "watch", "patch"]
{{- end }}
{{- end }}
