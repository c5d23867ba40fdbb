package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

var defaultTimeshare = tsconfig.Configuration{
	DefaultPreemptMinRuntime: &metav1.Duration{},
	DefaultReclaimMinRuntime: &metav1.Duration{},
	ReclaimResolveMethod:     tsconfig.ReclaimResolveLCA,
	DefaultRequeueDelay:      &metav1.Duration{Duration: 10 * time.Minute},
	RuntimeClock:             tsconfig.RuntimeClockAdmitted,
	DefaultNoticePeriod:      &metav1.Duration{},
	HeadsPerCycle:            ptr.To[int32](1),
	PendingStatusWriters:     ptr.To[int32](0),
	MaxHandoverHold:          &metav1.Duration{Duration: 5 * time.Minute},
	AdmissionEstimates:       tsconfig.AdmissionEstimates{RefreshInterval: &metav1.Duration{Duration: 5 * time.Second}},
	Metrics:                  tsconfig.Metrics{LongWaitThreshold: &metav1.Duration{Duration: time.Hour}},
}

// Feature gates are process-wide, so the cases that set them run the binary instead
// (cmd/kueue-timeshare).
func TestLoadConfig(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file    string   // empty: no --config
		wantErr []string // substrings of the error; nil means success
		check   func(t *testing.T, cfg Config)
	}{
		"defaults without a file": {
			check: func(t *testing.T, cfg Config) {
				if diff := cmp.Diff(ptr.To(9443), cfg.Kueue.Webhook.Port); diff != "" {
					t.Errorf("webhook port (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(defaultTimeshare, cfg.Timeshare); diff != "" {
					t.Errorf("timeshare section (-want +got):\n%s", diff)
				}
				if !internalCertsEnabled(&cfg.Kueue) {
					t.Error("internal certificate management should be on by default")
				}
			},
		},
		"file values override defaults": {
			file: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
webhook:
  port: 9555
internalCertManagement:
  enable: false
`,
			check: func(t *testing.T, cfg Config) {
				if diff := cmp.Diff(ptr.To(9555), cfg.Kueue.Webhook.Port); diff != "" {
					t.Errorf("webhook port (-want +got):\n%s", diff)
				}
				if internalCertsEnabled(&cfg.Kueue) {
					t.Error("internal certificate management should be off")
				}
				if diff := cmp.Diff(defaultTimeshare, cfg.Timeshare); diff != "" {
					t.Errorf("timeshare section (-want +got):\n%s", diff)
				}
			},
		},
		"timeshare section beside Kueue's fields": {
			file: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
webhook:
  port: 9556
timeshare:
  defaultPreemptMinRuntime: 5m
  reclaimResolveMethod: Queue
  runtimeClock: PodsReady
`,
			check: func(t *testing.T, cfg Config) {
				if diff := cmp.Diff(ptr.To(9556), cfg.Kueue.Webhook.Port); diff != "" {
					t.Errorf("webhook port (-want +got):\n%s", diff)
				}
				want := tsconfig.Configuration{
					DefaultPreemptMinRuntime: &metav1.Duration{Duration: 5 * time.Minute},
					DefaultReclaimMinRuntime: &metav1.Duration{},
					ReclaimResolveMethod:     tsconfig.ReclaimResolveQueue,
					DefaultRequeueDelay:      &metav1.Duration{Duration: 10 * time.Minute},
					RuntimeClock:             tsconfig.RuntimeClockPodsReady,
					DefaultNoticePeriod:      &metav1.Duration{},
					HeadsPerCycle:            ptr.To[int32](1),
					PendingStatusWriters:     ptr.To[int32](0),
					MaxHandoverHold:          &metav1.Duration{Duration: 5 * time.Minute},
					AdmissionEstimates:       tsconfig.AdmissionEstimates{RefreshInterval: &metav1.Duration{Duration: 5 * time.Second}},
					Metrics:                  tsconfig.Metrics{LongWaitThreshold: &metav1.Duration{Duration: time.Hour}},
				}
				if diff := cmp.Diff(want, cfg.Timeshare); diff != "" {
					t.Errorf("timeshare section (-want +got):\n%s", diff)
				}
			},
		},
		"headsPerCycle out of range names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  headsPerCycle: 0\n",
			wantErr: []string{"invalid configuration", "timeshare.headsPerCycle", "must be between 1 and 1000"},
		},
		"pendingStatusWriters out of range names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  pendingStatusWriters: 65\n",
			wantErr: []string{"invalid configuration", "timeshare.pendingStatusWriters", "must be between 0 and 64"},
		},
		"negative min-runtime names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultReclaimMinRuntime: -1m\n",
			wantErr: []string{"invalid configuration", "timeshare.defaultReclaimMinRuntime", "must not be negative"},
		},
		"negative notice names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultNoticePeriod: -1s\n",
			wantErr: []string{"invalid configuration", "timeshare.defaultNoticePeriod", "must not be negative"},
		},
		"a notice over an hour names the field and the bound": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultNoticePeriod: 2h\n",
			wantErr: []string{"invalid configuration", "timeshare.defaultNoticePeriod", "must be at most 1h0m0s"},
		},
		// With the gate off it is refused, naming the field and the gate: cmd/kueue-timeshare's
		// tests run the binary with the gate turned off.
		"a notice is accepted while PreemptionNotice is on (the default)": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultNoticePeriod: 5m\n",
			check: func(t *testing.T, cfg Config) {
				if got := cfg.Timeshare.DefaultNoticePeriod; got == nil || got.Duration != 5*time.Minute {
					t.Errorf("defaultNoticePeriod = %v, want 5m", got)
				}
			},
		},
		"a budget is refused while PreemptionBudget is off (the default), naming the field and the gate": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  preemptionBudget:\n    maxPreemptions: 2\n    period: 1h\n",
			wantErr: []string{"timeshare.preemptionBudget", "PreemptionBudget feature gate"},
		},
		"an invalid budget names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  preemptionBudget:\n    maxPreemptions: 2\n    period: 1h\n    burst: 1\n",
			wantErr: []string{"invalid configuration", "timeshare.preemptionBudget.burst", "must be at least maxPreemptions (2)"},
		},
		"a negative long-wait threshold names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  metrics:\n    longWaitThreshold: -1m\n",
			wantErr: []string{"invalid configuration", "timeshare.metrics.longWaitThreshold", "must not be negative"},
		},
		"a long-wait threshold of 0s is kept (no long-wait gauges)": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  metrics:\n    longWaitThreshold: 0s\n",
			check: func(t *testing.T, cfg Config) {
				if diff := cmp.Diff(&metav1.Duration{}, cfg.Timeshare.Metrics.LongWaitThreshold); diff != "" {
					t.Errorf("longWaitThreshold (-want +got):\n%s", diff)
				}
			},
		},
		"a negative estimate refresh interval names the field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  admissionEstimates:\n    refreshInterval: -5s\n",
			wantErr: []string{"invalid configuration", "timeshare.admissionEstimates.refreshInterval", "must not be negative"},
		},
		"an estimate refresh interval of 0s is kept (estimates only when asked)": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  admissionEstimates:\n    refreshInterval: 0s\n",
			check: func(t *testing.T, cfg Config) {
				if diff := cmp.Diff(&metav1.Duration{}, cfg.Timeshare.AdmissionEstimates.RefreshInterval); diff != "" {
					t.Errorf("refreshInterval (-want +got):\n%s", diff)
				}
			},
		},
		"an unknown metrics field is named": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  metrics:\n    longWait: 1h\n",
			wantErr: []string{"timeshare", "longWait"},
		},
		"unknown runtime clock names the field and the choices": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  runtimeClock: Running\n",
			wantErr: []string{"timeshare.runtimeClock", `"Admitted"`, `"PodsReady"`},
		},
		"unknown resolve method names the field and the choices": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  reclaimResolveMethod: Root\n",
			wantErr: []string{"timeshare.reclaimResolveMethod", `"LCA"`, `"Queue"`},
		},
		"unknown timeshare field": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultPreemptMinRunTime: 1m\n",
			wantErr: []string{"timeshare", "defaultPreemptMinRunTime"},
		},
		"bad duration": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultRequeueDelay: soon\n",
			wantErr: []string{"timeshare", "soon"},
		},
		"unknown Kueue field is still refused": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwebhok: {}\n",
			wantErr: []string{"loading configuration file", "webhok"},
		},
		"missing file names the path": {
			file:    "\x00missing",
			wantErr: []string{"loading configuration file", "does-not-exist.yaml"},
		},
		"malformed YAML": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwebhook: [",
			wantErr: []string{"loading configuration file"},
		},
		"invalid value names the field": {
			file: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: ["not-a-framework"]
`,
			wantErr: []string{"invalid configuration", "integrations.frameworks"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Gates are process-wide: put back what this case changed.

			path := ""
			switch {
			case tc.file == "\x00missing":
				path = filepath.Join(t.TempDir(), "does-not-exist.yaml")
			case tc.file != "":
				path = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, cfg, err := LoadConfig(scheme, path, "")
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("expected an error containing %q", tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestHeadsPerCycle(t *testing.T) {
	cases := map[string]struct {
		file string
		want int
	}{
		"the default is upstream's one head": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n",
			want: 1,
		},
		"as configured": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  headsPerCycle: 32\n",
			want: 32,
		},
		"blockAdmission keeps one workload at a time": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  blockAdmission: true\ntimeshare:\n  headsPerCycle: 32\n",
			want: 1,
		},
		"waitForPodsReady without blockAdmission": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  blockAdmission: false\ntimeshare:\n  headsPerCycle: 32\n",
			want: 32,
		},
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, cfg, err := LoadConfig(scheme, path, "")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, headsPerCycle(&cfg.Kueue, &cfg.Timeshare)); diff != "" {
				t.Errorf("heads per cycle (-want +got):\n%s", diff)
			}
		})
	}
}
