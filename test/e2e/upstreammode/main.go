// Command upstreammode runs the manager with Kueue's own admission loop and preemption
// (manager.Options.UpstreamScheduler), so that the end-to-end suite can compare what upstream
// Kueue does on the same cluster. Kueue's own binary cannot run there: with
// internalCertManagement off it reads its metrics certificate from a fixed path under /etc.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

func main() {
	var configFile string
	flag.StringVar(&configFile, "config", "", "Path to a Kueue Configuration.")
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	if err := run(configFile); err != nil {
		logger.Error(err, "upstream-mode manager stopped")
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(configFile string) error {
	scheme, err := manager.NewScheme()
	if err != nil {
		return err
	}
	ctrlOpts, cfg, err := manager.LoadConfig(scheme, configFile, "")
	if err != nil {
		return err
	}
	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	m, err := manager.New(ctx, kubeConfig, ctrlOpts, cfg, manager.Options{
		UpstreamScheduler: true, InsecureMetrics: true, Log: ctrl.Log.WithName("setup"),
		VisibilityCertDir: os.TempDir(),
	})
	if err != nil {
		return err
	}
	return m.Start(ctx)
}
