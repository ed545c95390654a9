// Command argocd-components is the part of Argo CD the GitOps e2e tests run: its application controller
// and its repo server, chosen by the name it is called by (tests symlink those two names to it), as Argo
// CD's own multi-call binary chooses (cmd/main.go). The components are Argo CD's own command packages,
// unchanged; what is left out is only what the tests never run (the API server and its UI, the CLI, Dex,
// notifications, the ApplicationSet, commit and CMP servers), about a quarter of the packages and of the
// cold build time.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func main() {
	// As Argo CD's binary does: klog (client-go's logs) through Argo CD's logger and its log settings.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
	var command *cobra.Command
	switch name := filepath.Base(os.Args[0]); name {
	case "argocd-application-controller":
		command = appcontroller.NewCommand()
	case "argocd-repo-server":
		command = reposerver.NewCommand()
	default:
		fmt.Fprintf(os.Stderr, "%s: run as argocd-application-controller or argocd-repo-server\n", name)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
