package manager

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/util/waitforpodsready"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
)

// Config is what the manager's configuration file holds: Kueue's Configuration and our section.
type Config struct {
	Kueue     configapi.Configuration
	Timeshare tsconfig.Configuration
}

// LoadConfig reads the Kueue Configuration (config.kueue.x-k8s.io/v1beta2) from path, or the
// defaults when path is empty, with our settings under its top-level `timeshare` key; applies the
// feature gates from the file and the command line, and validates the result. Errors say which
// step failed so that a bad file is easy to fix.
func LoadConfig(scheme *runtime.Scheme, path, featureGates string) (ctrl.Options, Config, error) {
	var all Config
	opts, cfg, ts, err := loadFile(scheme, path)
	if err != nil {
		if path == "" {
			return opts, all, fmt.Errorf("loading default configuration: %w", err)
		}
		return opts, all, fmt.Errorf("loading configuration file %q: %w", path, err)
	}
	all = Config{Kueue: cfg, Timeshare: ts}
	if errs := tsconfig.Validate(&all.Timeshare); len(errs) > 0 {
		return opts, all, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	opts, err = validateKueue(scheme, opts, &all.Kueue, featureGates)
	if err == nil && all.Timeshare.RuntimeClock == tsconfig.RuntimeClockPodsReady && !waitforpodsready.Enabled(all.Kueue.WaitForPodsReady) {
		err = fmt.Errorf("invalid configuration: %w", field.Invalid(field.NewPath(tsconfig.SectionKey, "runtimeClock"), all.Timeshare.RuntimeClock,
			"PodsReady needs waitForPodsReady, which keeps the PodsReady condition up to date and is off while the DisableWaitForPodsReady feature gate is on"))
	}
	if refused := plugins.Units().RefusedConfig(&all.Timeshare, policy.GateOn); err == nil && len(refused) > 0 {
		err = fmt.Errorf("invalid configuration: %w", refused.ToAggregate())
	}
	return opts, all, err
}

// loadFile splits our section off the file and hands the rest to Kueue's strict loader.
func loadFile(scheme *runtime.Scheme, path string) (ctrl.Options, configapi.Configuration, tsconfig.Configuration, error) {
	var ts tsconfig.Configuration
	if path == "" {
		opts, cfg, err := config.Load(scheme, "")
		tsconfig.SetDefaults(&ts)
		return opts, cfg, ts, err
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	doc, err := yaml.YAMLToJSON(content)
	if err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, fmt.Errorf("the file must hold one YAML object: %w", err)
	}
	if ts, err = tsconfig.Decode(top[tsconfig.SectionKey]); err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	tsconfig.SetDefaults(&ts)
	delete(top, tsconfig.SectionKey)
	rest, err := json.Marshal(top)
	if err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	// Kueue's loader only reads files; JSON is YAML.
	tmp, err := os.CreateTemp("", "kueue-config-*.json")
	if err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(rest); err != nil {
		tmp.Close()
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	if err := tmp.Close(); err != nil {
		return ctrl.Options{}, configapi.Configuration{}, ts, err
	}
	opts, cfg, err := config.Load(scheme, tmp.Name())
	return opts, cfg, ts, err
}

func validateKueue(scheme *runtime.Scheme, opts ctrl.Options, cfg *configapi.Configuration, featureGates string) (ctrl.Options, error) {
	if err := tsfeatures.ApplyKueueDefaults(); err != nil {
		return opts, fmt.Errorf("setting kueue-timeshare's defaults of Kueue's feature gates: %w", err)
	}
	if errs := config.LoadAndValidateFeatureGates(featureGates, cfg.FeatureGates); len(errs) > 0 {
		return opts, fmt.Errorf("invalid feature gates: %w", errs.ToAggregate())
	}
	if err := scheduler.CheckFeatureGates(); err != nil {
		return opts, fmt.Errorf("invalid feature gates: %w", err)
	}
	// Refused at start rather than crashing under load: see docs/configuration.md.
	if features.Enabled(features.WorkloadRequestUseMergePatch) {
		return opts, fmt.Errorf("invalid feature gates: %s is not supported: in Kueue v0.19.2 an eviction under it reads the Workload's admission "+
			"after a merge patch that may have removed it (a nil dereference in evict.Evict, which upstream's admission loop and ours both reach); leave it off",
			features.WorkloadRequestUseMergePatch)
	}
	if errs := config.Validate(cfg, scheme); len(errs) > 0 {
		return opts, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	if err := config.AddWebhookSettingsTo(&opts, cfg); err != nil {
		return opts, fmt.Errorf("invalid webhook settings: %w", err)
	}
	return opts, nil
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

// headsPerCycle is the scheduler's budget of heads per ClusterQueue per cycle: one under
// blockAdmission, which admits one workload at a time.
func headsPerCycle(cfg *configapi.Configuration, ts *tsconfig.Configuration) int {
	if blockAdmissionUntilPodsReady(cfg) || ts.HeadsPerCycle == nil {
		return 1
	}
	return int(*ts.HeadsPerCycle)
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
