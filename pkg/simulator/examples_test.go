package simulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestExamples runs every scenario under examples/scenarios, as the docs tell users to, with our
// features and without.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example scenarios, want at least the three stories", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if cmd := "go run ./cmd/kueue-timeshare simulate -f examples/scenarios/" + filepath.Base(f); !strings.Contains(string(text), cmd) {
				t.Errorf("the example does not say how to run it (%q)", cmd)
			}
			s, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []Mode{ModeTimeshare, ModeUpstream} {
				r := mustRun(t, s, mode)
				if got, want := len(r.Workloads), len(s.WorkloadSpecs()); got != want {
					t.Errorf("%s: %d workloads arrived, want %d", mode, got, want)
				}
				for _, n := range r.Notes {
					if !strings.HasPrefix(n, "stopped at") {
						t.Errorf("%s: %s", mode, n)
					}
				}
				if !strings.Contains(string(text), "until:") && len(r.Notes) > 0 {
					t.Errorf("%s: an example without simulation.until should finish: %v", mode, r.Notes)
				}
			}
		})
	}
}

// Reclaim protection must not starve the queue that reclaims: while borrowers are protected its
// pending head keeps the quota it waits for, so new borrowers cannot take each piece of quota that
// frees up and start new protections. Every training run of the min-runtime story therefore waits
// at most the reclaimMinRuntime (1h); before the head was kept active, one waited over five hours.
func TestReclaimProtectionDoesNotStarveTheOwner(t *testing.T) {
	s, err := Load(filepath.Join("..", "..", "examples", "scenarios", "min-runtime.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, s, ModeTimeshare)
	trains := 0
	for _, w := range r.Workloads {
		if w.ClusterQueue != "production" || !strings.HasPrefix(w.Name, "train") {
			continue
		}
		trains++
		if w.LongestWait > time.Hour {
			t.Errorf("%s waited %s at a stretch, more than the reclaimMinRuntime of 1h", w.Name, w.LongestWait)
		}
	}
	if trains != 3 {
		t.Fatalf("found %d training runs, want 3", trains)
	}
}

// A job that can never fit must not stop time-sharing (the unfit-job example): the turn passes
// over it, so every 2-GPU job is admitted again and again and waits about two hours at most
// (six jobs, two at a time, turns of an hour), while without the feature two of them never start.
func TestUnfitJobDoesNotStopRotation(t *testing.T) {
	s, err := Load(filepath.Join("..", "..", "examples", "scenarios", "unfit-job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type fate struct {
		Admitted           bool
		Repeatedly         bool
		WaitedAtMostTwoHrs bool
	}
	fates := func(r *Result) map[string]fate {
		out := map[string]fate{}
		for _, w := range r.Workloads {
			if w.Name == "too-big" {
				continue
			}
			out[w.Name] = fate{Admitted: w.Admissions > 0, Repeatedly: w.Admissions >= 3, WaitedAtMostTwoHrs: w.LongestWait <= 2*time.Hour+time.Minute}
		}
		return out
	}
	good := fate{Admitted: true, Repeatedly: true, WaitedAtMostTwoHrs: true}
	want := map[string]fate{"train-1": good, "train-2": good, "train-3": good, "late-1": good, "late-2": good, "late-3": good}
	if diff := cmp.Diff(want, fates(mustRun(t, s, ModeTimeshare))); diff != "" {
		t.Errorf("kueue-timeshare (-want +got):\n%s", diff)
	}
	starved := 0
	for _, f := range fates(mustRun(t, s, ModeUpstream)) {
		if !f.Admitted {
			starved++
		}
	}
	if starved == 0 {
		t.Error("upstream semantics: every job was admitted; the example no longer shows the starvation it is about")
	}
}
