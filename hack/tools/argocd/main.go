// Command argocd-lua-health computes Argo CD's health of Kubernetes objects the way Argo CD's application
// controller does (controller/health.go): the argocd-cm ConfigMap is read by Argo CD's own settings
// manager (util/settings), which turns its resource.customizations.health.<group_kind> keys into resource
// overrides, and each object's health comes from gitops-engine's health.GetResourceHealth with those
// overrides, that is Argo CD's Lua VM (util/lua: gopher-lua in Argo CD's sandbox, `obj` converted by
// Argo CD). It runs deploy/argocd/health.lua exactly as an Argo CD with deploy/argocd/argocd-cm-snippet.yaml
// applied would (tests/unit/test_argocd_health_vm.py).
//
// Usage: argocd-lua-health [-vm-only] ARGOCD_CM_YAML < objects.json
// where objects.json is a JSON array of objects; prints a JSON array with, per object, {"status",
// "message"} or {"error"}. With -vm-only, the health script alone, run by Argo CD's Lua VM as
// util/lua's ResourceHealthOverrides does, without what gitops-engine decides before it (a deleting
// object is "Progressing: Pending deletion" whatever the script says).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/argoproj/gitops-engine/pkg/health"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
)

type result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// vmOnly is util/lua's ResourceHealthOverrides.GetResourceHealth, spelled out.
func vmOnly(obj *unstructured.Unstructured, overrides map[string]v1alpha1.ResourceOverride) (*health.HealthStatus, error) {
	vm := lua.VM{ResourceOverrides: overrides}
	script, useOpenLibs, err := vm.GetHealthScript(obj)
	if err != nil || script == "" {
		return nil, err
	}
	vm.UseOpenLibs = useOpenLibs
	return vm.ExecuteHealthLua(obj, script)
}

func run(cmPath string, onlyVM bool, in io.Reader, out io.Writer) error {
	raw, err := os.ReadFile(cmPath)
	if err != nil {
		return err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		return fmt.Errorf("%s: %w", cmPath, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Argo CD's settings manager reads argocd-cm from the API; here from a fake clientset holding it.
	mgr := settings.NewSettingsManager(ctx, fake.NewClientset(&cm), cm.Namespace)
	overrides, err := mgr.GetResourceOverrides()
	if err != nil {
		return fmt.Errorf("argocd-cm: %w", err)
	}
	var objects []map[string]any
	if err := json.NewDecoder(in).Decode(&objects); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	results := make([]result, 0, len(objects))
	for _, obj := range objects {
		u := &unstructured.Unstructured{Object: obj}
		var status *health.HealthStatus
		var err error
		if onlyVM {
			status, err = vmOnly(u, overrides)
		} else {
			status, err = health.GetResourceHealth(u, lua.ResourceHealthOverrides(overrides))
		}
		switch {
		case err != nil:
			results = append(results, result{Error: err.Error()})
		case status == nil:
			results = append(results, result{Error: "no health check applies"})
		default:
			results = append(results, result{Status: string(status.Status), Message: status.Message})
		}
	}
	return json.NewEncoder(out).Encode(results)
}

func main() {
	onlyVM := flag.Bool("vm-only", false, "run the health script alone, without gitops-engine's checks before it")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua-health [-vm-only] ARGOCD_CM_YAML < objects.json")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *onlyVM, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-lua-health:", err)
		os.Exit(1)
	}
}
