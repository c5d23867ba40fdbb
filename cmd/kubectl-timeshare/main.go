// Command kubectl-timeshare is a kubectl plugin (kubectl timeshare ...) that shows kueue-timeshare's
// turns, protections and waits. It only reads (get, list, watch).
package main

import (
	"context"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"

	// Client auth plugins (exec, OIDC, ...) for kubeconfigs that use them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// what-if runs Kueue's controllers in process (the simulator); their logs are not the
	// plugin's output.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(app.Run(context.Background(), os.Args[1:], app.Streams{Out: os.Stdout, ErrOut: os.Stderr}, app.Options{}))
}
