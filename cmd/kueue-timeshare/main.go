// Command kueue-timeshare is a drop-in replacement for Kueue's kueue-controller-manager that adds
// runtime-aware preemption. It reads the same configuration file and accepts the same flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/features"

	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/version"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/visibility"

	// Client auth plugins (exec, OIDC, ...) for kubeconfigs that use them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "simulate" {
		os.Exit(runSimulate(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run())
}

func run() int {
	var (
		configFile   string
		featureGates string
		showVersion  bool
		opts         manager.Options
	)
	flag.BoolVar(&showVersion, "version", false, "Print kueue-timeshare's version and the Kueue release it is built on, then exit.")
	flag.StringVar(&configFile, "config", "", "Path to a Kueue Configuration (config.kueue.x-k8s.io/v1beta2). Defaults apply when empty.")
	flag.StringVar(&featureGates, "feature-gates", "", "Comma-separated key=value pairs that turn feature gates on or off; they override the configuration file.")
	flag.StringVar(&opts.MetricsCertDir, "metrics-cert-dir", manager.DefaultMetricsCertDir, "Directory with tls.crt and tls.key for the metrics endpoint when internalCertManagement is disabled.")
	flag.BoolVar(&opts.InsecureMetrics, "metrics-insecure", false, "Serve metrics over plain HTTP without authentication. For local development only.")
	flag.StringVar(&opts.VisibilityCertDir, "visibility-cert-dir", visibility.DefaultCertDir, "Directory with tls.crt and tls.key for the visibility API server; with internalCertManagement enabled, where it writes a self-signed certificate.")
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion {
		fmt.Println(version.Get())
		return 0
	}

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	setupLog := logger.WithName("setup")
	opts.Log = setupLog

	scheme, err := manager.NewScheme()
	if err != nil {
		setupLog.Error(err, "Unable to build the API scheme")
		return 1
	}
	ctrlOpts, cfg, err := manager.LoadConfig(scheme, configFile, featureGates)
	if err != nil {
		setupLog.Error(err, "Unable to start: bad configuration")
		fmt.Fprintf(os.Stderr, "kueue-timeshare: %v\n", err)
		return 1
	}
	if encoded, err := config.Encode(scheme, &cfg.Kueue); err == nil {
		setupLog.V(2).Info("Configuration loaded", "config", encoded, "timeshare", cfg.Timeshare)
	}
	v := version.Get()
	setupLog.Info("Starting kueue-timeshare", "version", v.Version, "kueueVersion", v.KueueVersion, "gitCommit", v.GitCommit)
	features.LogFeatureGates(setupLog)
	tsfeatures.Log(setupLog)

	opts.Kubeconfig = kubeconfigPath()
	kubeConfig, err := ctrl.GetConfig()
	if err != nil {
		setupLog.Error(err, "Unable to find a kubeconfig")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	m, err := manager.New(ctx, kubeConfig, ctrlOpts, cfg, opts)
	if err != nil {
		setupLog.Error(err, "Unable to set up the manager")
		return 1
	}
	setupLog.Info("Starting manager")
	if err := m.Start(ctx); err != nil {
		setupLog.Error(err, "Manager stopped with an error")
		return 1
	}
	return 0
}

// kubeconfigPath is the kubeconfig file the manager connects with, if it names one: --kubeconfig
// (registered by controller-runtime), else a KUBECONFIG of a single file. The visibility server
// delegates authentication and authorization with it; empty means the in-cluster configuration.
func kubeconfigPath() string {
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	if env := os.Getenv("KUBECONFIG"); env != "" && !strings.Contains(env, string(os.PathListSeparator)) {
		return env
	}
	return ""
}
