package manager

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/util/waitforpodsready"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
)

// LoadConfig reads the Kueue Configuration (config.kueue.x-k8s.io/v1beta2) from path, or the
// defaults when path is empty, applies the feature gates from the file and the command line,
// and validates the result. Errors say which step failed so that a bad file is easy to fix.
func LoadConfig(scheme *runtime.Scheme, path, featureGates string) (ctrl.Options, configapi.Configuration, error) {
	opts, cfg, err := config.Load(scheme, path)
	if err != nil {
		if path == "" {
			return opts, cfg, fmt.Errorf("loading default configuration: %w", err)
		}
		return opts, cfg, fmt.Errorf("loading configuration file %q: %w", path, err)
	}
	if errs := config.LoadAndValidateFeatureGates(featureGates, cfg.FeatureGates); len(errs) > 0 {
		return opts, cfg, fmt.Errorf("invalid feature gates: %w", errs.ToAggregate())
	}
	if err := scheduler.CheckFeatureGates(); err != nil {
		return opts, cfg, fmt.Errorf("invalid feature gates: %w", err)
	}
	if errs := config.Validate(&cfg, scheme); len(errs) > 0 {
		return opts, cfg, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	if err := config.AddWebhookSettingsTo(&opts, &cfg); err != nil {
		return opts, cfg, fmt.Errorf("invalid webhook settings: %w", err)
	}
	return opts, cfg, nil
}

func internalCertsEnabled(cfg *configapi.Configuration) bool {
	return cfg.InternalCertManagement != nil && cfg.InternalCertManagement.Enable != nil && *cfg.InternalCertManagement.Enable
}

func leaderElectionEnabled(cfg *configapi.Configuration) bool {
	return cfg.LeaderElection != nil && cfg.LeaderElection.LeaderElect != nil && *cfg.LeaderElection.LeaderElect
}

// blockAdmissionUntilPodsReady reports whether waitForPodsReady asks the cache to hold
// further admissions while an admitted workload's pods are not ready.
func blockAdmissionUntilPodsReady(cfg *configapi.Configuration) bool {
	if !waitforpodsready.Enabled(cfg.WaitForPodsReady) {
		return false
	}
	b := cfg.WaitForPodsReady.BlockAdmission
	return b != nil && *b
}

func requeuingTimestamp(cfg *configapi.Configuration) configapi.RequeuingTimestamp {
	w := cfg.WaitForPodsReady
	if w == nil || w.RequeuingStrategy == nil || w.RequeuingStrategy.Timestamp == nil {
		return configapi.EvictionTimestamp
	}
	return *w.RequeuingStrategy.Timestamp
}

func quotaCheckStrategy(cfg *configapi.Configuration) configapi.QuotaCheckStrategy {
	if !features.Enabled(features.QuotaCheckStrategy) || cfg.Resources == nil || cfg.Resources.QuotaCheckStrategy == nil {
		return configapi.QuotaCheckBlockUndeclared
	}
	return *cfg.Resources.QuotaCheckStrategy
}
