// Command kstatus-check prints the kstatus verdict (the status model Flux and other GitOps tools
// use to decide whether a resource is ready) for LiqoPeering resources.
//
// It reads them either from a cluster (--kubeconfig, optionally --context and --namespace) or
// from a YAML file holding one or more documents (--file), and prints one line per object:
//
//	namespace/name: <Current|InProgress|Failed|Terminating|NotFound|Unknown> <message>
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

var liqoPeerings = schema.GroupVersionResource{
	Group:    "peering.liqo-operator.io",
	Version:  "v1alpha1",
	Resource: "liqopeerings",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to list LiqoPeerings from")
	kubeContext := flag.String("context", "", "kubeconfig context (default: the current one)")
	namespace := flag.String("namespace", "", "only this namespace (default: all namespaces)")
	file := flag.String("file", "", "compute the status of the objects in this YAML file instead of a cluster ('-' for stdin)")
	flag.Parse()

	var (
		objs []*unstructured.Unstructured
		err  error
	)
	switch {
	case *file != "":
		objs, err = fromFile(*file)
	case *kubeconfig != "":
		objs, err = fromCluster(*kubeconfig, *kubeContext, *namespace)
	default:
		err = errors.New("one of --file or --kubeconfig is required")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus-check:", err)
		os.Exit(2)
	}

	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	for _, obj := range objs {
		res, err := status.Compute(obj)
		if err != nil {
			fmt.Printf("%s/%s: %s %s\n", obj.GetNamespace(), obj.GetName(), status.UnknownStatus, err)
			continue
		}
		fmt.Printf("%s/%s: %s %s\n", obj.GetNamespace(), obj.GetName(), res.Status, res.Message)
	}
}

func fromCluster(kubeconfig, kubeContext, namespace string) ([]*unstructured.Unstructured, error) {
	loader := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loader, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := client.Resource(liqoPeerings).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing liqopeerings: %w", err)
	}
	objs := make([]*unstructured.Unstructured, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	return objs, nil
}

func fromFile(path string) ([]*unstructured.Unstructured, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		// A List (as printed by `kubectl get -o yaml`) is flattened into its items.
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
			continue
		}
		objs = append(objs, obj)
	}
	return objs, nil
}
