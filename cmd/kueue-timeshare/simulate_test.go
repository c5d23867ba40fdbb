package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With KUEUE_TIMESHARE_TEST_MAIN_ARGS set, the test binary is the kueue-timeshare binary itself,
// from main down: for the dispatch to the simulate subcommand.
func init() {
	if args := os.Getenv("KUEUE_TIMESHARE_TEST_MAIN_ARGS"); args != "" {
		os.Args = append([]string{"kueue-timeshare"}, strings.Fields(args)...)
		main()
	}
}

const scenario = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 1m}}
---
name: two-jobs
workloads:
  - {name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 2m, checkpointed: true}
  - {name: b, arrival: 1s, clusterQueue: cq, resources: {cpu: 1}, duration: 2m, checkpointed: true}
`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimulateCommand(t *testing.T) {
	good := writeFile(t, "good.yaml", scenario)
	bad := writeFile(t, "bad.yaml", strings.Replace(scenario, "duration: 2m, checkpointed: true}\n  - {name: b", "duration: two minutes}\n  - {name: b", 1))
	svg := filepath.Join(t.TempDir(), "chart.svg")
	cases := map[string]struct {
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		"no scenario": {
			wantCode:   2,
			wantStderr: []string{"-f scenario.yaml is required", "Usage: kueue-timeshare simulate -f scenario.yaml"},
		},
		"unknown output format": {
			args:       []string{"-f", good, "--output", "xml"},
			wantCode:   2,
			wantStderr: []string{`--output "xml": use table or json`},
		},
		"stray argument": {
			args:       []string{"-f", good, "extra"},
			wantCode:   2,
			wantStderr: []string{`unexpected argument "extra"`},
		},
		"missing file": {
			args:       []string{"-f", filepath.Join(t.TempDir(), "absent.yaml")},
			wantCode:   1,
			wantStderr: []string{"absent.yaml: no such file or directory"},
		},
		"bad scenario names the line and the field": {
			args:       []string{"-f", bad},
			wantCode:   1,
			wantStderr: []string{`bad.yaml:14: workloads[0].duration: "two minutes" is not a duration (write it like 90s, 15m or 4h)`},
		},
		"table with comparison and timeline": {
			args:     []string{"-f", good, "--compare", "--timeline"},
			wantCode: 0,
			wantStdout: []string{
				"Scenario two-jobs", "Cells show: kueue-timeshare / upstream (features off)",
				"Timeline (kueue-timeshare)", "a is preempted by b (InClusterQueueTimeBased)",
				"Timeline (upstream (features off))",
			},
		},
		"help": {
			args:       []string{"-h"},
			wantCode:   0,
			wantStderr: []string{"-compare", "-svg"},
		},
		"chart": {
			args:       []string{"-f", good, "--svg", svg, "--booster"},
			wantCode:   0,
			wantStdout: []string{"Cells show: kueue-timeshare / upstream + priority booster"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runSimulate(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			for _, s := range tc.wantStdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
	chart, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(chart, []byte("<svg ")) || !bytes.Contains(chart, []byte("two-jobs: upstream + priority booster")) {
		t.Errorf("chart:\n%.300s", chart)
	}
}

func TestSimulateJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runSimulate([]string{"-f", writeFile(t, "s.yaml", scenario), "--compare", "--output", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	var doc struct {
		Runs []struct {
			Mode      string
			Workloads []struct{ Name string }
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Mode != "timeshare" || doc.Runs[1].Mode != "upstream" || len(doc.Runs[0].Workloads) != 2 {
		t.Errorf("runs: %+v", doc.Runs)
	}
}

// TestSimulateDispatch runs the binary's main: "simulate" selects the subcommand before the
// manager's flags are parsed.
func TestSimulateDispatch(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KUEUE_TIMESHARE_TEST_MAIN_ARGS=simulate -f "+writeFile(t, "s.yaml", scenario))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("exit %v:\n%s", err, out)
	}
	if !strings.Contains(string(out), "Scenario two-jobs") {
		t.Errorf("output:\n%s", out)
	}
}

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := &progressBar{out: &out, label: "kueue-timeshare"}
	p.update(30*time.Minute, time.Hour)
	// Within a tenth of a second of the last drawing: nothing.
	p.update(40*time.Minute, time.Hour)
	want := "\rkueue-timeshare [###############...............]  50% of 1h0m0s simulated"
	if out.String() != want {
		t.Errorf("drawn %q, want %q", out.String(), want)
	}
	p.done()
	if !strings.HasSuffix(out.String(), "\r\033[K") {
		t.Errorf("the bar is not cleared: %q", out.String())
	}
	var nothing *progressBar
	nothing.done()
	if isTerminal(&out) {
		t.Error("a buffer is not a terminal")
	}
}
