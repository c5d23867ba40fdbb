package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/version"
)

// The test binary doubles as the manager binary: feature gates and flags are process-wide, so
// each case runs in a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("KUEUE_TIMESHARE_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"kueue-timeshare"}, strings.Fields(os.Getenv("KUEUE_TIMESHARE_TEST_ARGS"))...)
		os.Exit(run())
	}
	os.Exit(m.Run())
}

func TestBadConfigurationStopsTheManager(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withGates := write("gates.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates:\n  VisibilityOnDemand: false\n")
	badField := write("bad-field.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  timeout: -1s\n")
	unknownKind := write("kind.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: NotAConfiguration\n")
	podsReadyClock := write("pods-ready-clock.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  runtimeClock: PodsReady\n")
	notice := write("notice.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultNoticePeriod: 10m\n")
	budget := write("budget.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  preemptionBudget:\n    maxPreemptions: 2\n    period: 1h\n")
	preemptorsLast := write("preemptors-last.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates:\n  PrioritizePreemptorWorkloads: false\n")
	badTimeshare := write("bad-timeshare.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  reclaimResolveMethod: Root\n  defaultPreemptMinRuntime: -5m\n")

	cases := map[string]struct {
		args     string
		wantText []string
		// wantAbsent must not be in the output.
		wantAbsent []string
	}{
		"unknown feature gate": {
			args:     "--feature-gates=NoSuchGate=true",
			wantText: []string{"invalid feature gates", "unrecognized feature gate: NoSuchGate"},
		},
		"gates both in the file and on the command line": {
			args:     "--config=" + withGates + " --feature-gates=VisibilityOnDemand=false",
			wantText: []string{"feature gates for CLI and configuration cannot both specified"},
		},
		"missing configuration file": {
			args:     "--config=" + filepath.Join(dir, "absent.yaml"),
			wantText: []string{"loading configuration file", "absent.yaml", "no such file or directory"},
		},
		"invalid field value": {
			args:     "--config=" + badField,
			wantText: []string{"invalid configuration", "waitForPodsReady.timeout"},
		},
		"our gates are set like upstream's": {
			args:     "--feature-gates=TimeBasedSamePriorityPreemption=false,MinRuntimeProtection=false,PreemptionToleration=false,ExpectedRuntimeRequeue=false,HandoverAfterVictimTermination=false,PreemptionNotice=true,PreemptionBudget=true --zap-log-level=2 --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText: []string{`"featureGates":{"ExpectedRuntimeRequeue":false,"HandoverAfterVictimTermination":false,"MinRuntimeProtection":false,"PreemptionBudget":true,"PreemptionNotice":true,"PreemptionToleration":false,"TimeBasedSamePriorityPreemption":false}`, "no-kubeconfig"},
		},
		"Kueue's PrioritizePreemptorWorkloads is on by default": {
			args:     "--zap-log-level=2 --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText: []string{`"PrioritizePreemptorWorkloads":true`, "no-kubeconfig"},
		},
		"PrioritizePreemptorWorkloads turned off on the command line": {
			args:     "--feature-gates=PrioritizePreemptorWorkloads=false --zap-log-level=2 --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText: []string{`"PrioritizePreemptorWorkloads":false`, "no-kubeconfig"},
		},
		"PrioritizePreemptorWorkloads turned off in the configuration file": {
			args:     "--config=" + preemptorsLast + " --zap-log-level=2 --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText: []string{`"PrioritizePreemptorWorkloads":false`, "no-kubeconfig"},
		},
		"a default notice while PreemptionNotice is turned off": {
			args:     "--config=" + notice + " --feature-gates=PreemptionNotice=false",
			wantText: []string{"invalid configuration", "timeshare.defaultNoticePeriod", "needs the PreemptionNotice feature gate, which is off"},
		},
		"a default notice with PreemptionNotice on (beta, the default) passes the configuration checks": {
			// The manager then stops on the missing cluster, past every configuration check.
			args:       "--config=" + notice + " --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText:   []string{"no-kubeconfig"},
			wantAbsent: []string{"invalid configuration", "defaultNoticePeriod"},
		},
		"a budget while PreemptionBudget is off (alpha, the default)": {
			args:     "--config=" + budget,
			wantText: []string{"invalid configuration", "timeshare.preemptionBudget", "needs the PreemptionBudget feature gate, which is off"},
		},
		"a budget with PreemptionBudget on passes the configuration checks": {
			args:       "--config=" + budget + " --feature-gates=PreemptionBudget=true --kubeconfig=" + filepath.Join(dir, "no-kubeconfig"),
			wantText:   []string{"no-kubeconfig"},
			wantAbsent: []string{"invalid configuration", "preemptionBudget"},
		},
		"invalid timeshare settings": {
			args: "--config=" + badTimeshare,
			wantText: []string{"invalid configuration", "timeshare.defaultPreemptMinRuntime", "must not be negative",
				"timeshare.reclaimResolveMethod", `supported values: "LCA", "Queue"`},
		},
		"upstream's WorkloadRequestUseMergePatch, which crashes v0.19.2's eviction path": {
			args:     "--feature-gates=WorkloadRequestUseMergePatch=true",
			wantText: []string{"invalid feature gates", "WorkloadRequestUseMergePatch is not supported", "leave it off"},
		},
		"the PodsReady clock without waitForPodsReady": {
			args:     "--config=" + podsReadyClock + " --feature-gates=DisableWaitForPodsReady=true",
			wantText: []string{"invalid configuration", "timeshare.runtimeClock", "PodsReady needs waitForPodsReady"},
		},
		"wrong kind": {
			args:     "--config=" + unknownKind,
			wantText: []string{"loading configuration file", "NotAConfiguration"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "KUEUE_TIMESHARE_TEST_RUN_MAIN=1", "KUEUE_TIMESHARE_TEST_ARGS="+tc.args)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("want exit code 1, got %v; output:\n%s", err, out)
			}
			for _, s := range tc.wantText {
				if !strings.Contains(string(out), s) {
					t.Errorf("output does not mention %q:\n%s", s, out)
				}
			}
			for _, s := range tc.wantAbsent {
				if strings.Contains(string(out), s) {
					t.Errorf("output mentions %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "KUEUE_TIMESHARE_TEST_RUN_MAIN=1", "KUEUE_TIMESHARE_TEST_ARGS=--version")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v; output:\n%s", err, out)
	}
	want := "kueue-timeshare " + version.Version + " (Kueue " + version.KueueVersion + ", commit "
	if !strings.HasPrefix(string(out), want) || strings.Count(string(out), "\n") != 1 {
		t.Errorf("--version printed %q, want one line starting %q", out, want)
	}
}
