package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/recorder"
)

func cohort(quota string, queues int, workloads ...generator.WorkloadsSet) generator.CohortSet {
	return generator.CohortSet{ClassName: "c", Count: 2, QueuesSets: []generator.QueuesSet{{
		ClassName: "cq", Count: queues, NominalQuota: quota, WorkloadsSets: workloads,
	}}}
}

func set(count int, runtimeMs uint, request string, pods int) generator.WorkloadsSet {
	return generator.WorkloadsSet{Count: count, Workloads: []generator.WorkloadTemplate{{
		ClassName: "w", RuntimeMs: runtimeMs, Request: request, PodCount: pods,
	}}}
}

func TestCapacityBoundAndQuotaWorth(t *testing.T) {
	_, deep := deepLoad(1)
	_, deepScaled := deepLoad(0.2)
	cases := map[string]struct {
		cfg       *generator.Config
		wantBound time.Duration
		wantWorth int
	}{
		// Upstream's baseline per cohort: 6 queues of 20 CPUs; per queue 350×0.2 s×1 +
		// 100×0.5 s×5 + 50×1 s×20 = 1,320 CPU·s; 7,920 / 120 = 66 s. Mean request 3.7 CPUs.
		"baseline": {
			cfg:       &generator.Config{Cohorts: []generator.CohortSet{cohort("20", 6, set(350, 200, "1", 0), set(100, 500, "5", 0), set(50, 1000, "20", 0))}},
			wantBound: 66 * time.Second,
			wantWorth: 64, // 2 cohorts × 6 queues × 20 / 3.7
		},
		// Requests are per pod: 2 pods of 500m are one CPU.
		"pods": {
			cfg:       &generator.Config{Cohorts: []generator.CohortSet{cohort("4", 1, set(8, 1000, "500m", 2))}},
			wantBound: 2 * time.Second,
			wantWorth: 8,
		},
		// The largest cohort set bounds.
		"largest cohort": {
			cfg: &generator.Config{Cohorts: []generator.CohortSet{
				cohort("10", 1, set(10, 1000, "1", 0)),
				cohort("10", 1, set(30, 1000, "1", 0)),
			}},
			wantBound: 3 * time.Second,
			wantWorth: 40,
		},
		"deep": {cfg: deep, wantBound: 5 * time.Second, wantWorth: 600},
		// Counts and quotas scale together: the same bound.
		"deep at 0.2": {cfg: deepScaled, wantBound: 5 * time.Second, wantWorth: 120},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bound, err := capacityBound(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			worth, err := quotaWorth(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.wantBound, tc.wantWorth}, []any{bound.Round(time.Millisecond), worth}); diff != "" {
				t.Errorf("bound, worth (-want +got):\n%s", diff)
			}
		})
	}
}

// shape is what a deep load's part holds, per ClusterQueue class.
type shape struct {
	Class                     string
	Queues, Workloads, Sets   int
	Quota, Borrowing, Request string
	Runtime                   time.Duration
	Policies                  []kueue.PreemptionPolicy
}

func shapeOf(cfg *generator.Config) []shape {
	var out []shape
	for _, c := range cfg.Cohorts {
		for _, qs := range c.QueuesSets {
			s := shape{Class: qs.ClassName, Queues: c.Count * qs.Count, Sets: len(qs.WorkloadsSets), Quota: qs.NominalQuota,
				Borrowing: qs.BorrowingLimit, Policies: []kueue.PreemptionPolicy{qs.ReclaimWithinCohort, qs.WithinClusterQueue}}
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					s.Workloads += ws.Count
					s.Request = w.Request
					s.Runtime = time.Duration(w.RuntimeMs) * time.Millisecond
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func TestDeepLoad(t *testing.T) {
	never := []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyNever}
	cases := map[string]struct {
		scale                   float64
		wantSetup, wantMeasured []shape
	}{
		"full": {
			scale:        1,
			wantSetup:    []shape{{Class: "background", Queues: 20, Workloads: 150, Sets: 3, Quota: "150", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
			wantMeasured: []shape{{Class: "deep", Queues: 3, Workloads: 500, Sets: 10, Quota: "200", Borrowing: "0", Request: "1", Runtime: 2 * time.Second, Policies: never}},
		},
		"0.2": {
			scale:        0.2,
			wantSetup:    []shape{{Class: "background", Queues: 20, Workloads: 30, Sets: 3, Quota: "30", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
			wantMeasured: []shape{{Class: "deep", Queues: 3, Workloads: 100, Sets: 10, Quota: "40", Borrowing: "0", Request: "1", Runtime: 2 * time.Second, Policies: never}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			setup, measured := deepLoad(tc.scale)
			if diff := cmp.Diff(tc.wantSetup, shapeOf(setup)); diff != "" {
				t.Errorf("setup (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMeasured, shapeOf(measured)); diff != "" {
				t.Errorf("measured (-want +got):\n%s", diff)
			}
		})
	}
	l, err := buildLoad("deep", "", "", "", 0.2)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Background []string
		Hold       bool
	}
	if diff := cmp.Diff(got{Background: []string{"background"}, Hold: true}, got{l.background, l.hold}); diff != "" {
		t.Errorf("deep load (-want +got):\n%s", diff)
	}
	if _, err := buildLoad("deep", "some.yaml", "", "", 1); err == nil {
		t.Error("a generator configuration was accepted for the deep load")
	}
	if _, err := buildLoad("nope", "", "", "", 1); err == nil {
		t.Error("an unknown load was accepted")
	}
}

func TestBuildLoadTAS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "generator.yaml")
	text := `topology:
  name: topo
  levels:
  - {name: rack, count: 2, nodeLabel: rack}
  - {name: node, count: 2, nodeLabel: kubernetes.io/hostname}
resourceFlavor: {name: tas-flavor, nodeLabel: tas-node-group, topologyName: topo}
cohorts:
- className: cohort
  count: 1
  queuesSets:
  - className: cq
    count: 1
    nominalQuota: "4"
    workloadsSets:
    - count: 10
      workloads: [{className: small, runtimeMs: 100, request: 500m, podCount: 2}]
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := buildLoad("tas", path, "", "", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		SetupTopology, MeasuredTopology bool
		SetupFlavor, MeasuredFlavor     string
		SetupCohorts, Workloads         int
	}
	want := got{SetupTopology: true, SetupFlavor: "tas-flavor", MeasuredFlavor: "tas-flavor", Workloads: 5}
	w, _ := workloadCount(l.cfg)
	if diff := cmp.Diff(want, got{
		SetupTopology: l.setup.Topology != nil, MeasuredTopology: l.cfg.Topology != nil,
		SetupFlavor: l.setup.ResourceFlavor.Name, MeasuredFlavor: l.cfg.ResourceFlavor.Name,
		SetupCohorts: len(l.setup.Cohorts), Workloads: w,
	}); diff != "" {
		t.Errorf("tas load (-want +got):\n%s", diff)
	}
}

func TestDeepRate(t *testing.T) {
	s := func(secs ...float64) []time.Duration {
		var out []time.Duration
		for _, v := range secs {
			out = append(out, time.Duration(v*float64(time.Second)))
		}
		return out
	}
	type out struct {
		Rate  float64
		Until time.Duration
		OK    bool
	}
	cases := map[string]struct {
		admitted     []time.Duration
		total, worth int
		want         out
	}{
		// Backlog 10, worth 4: deep until the 7th admission (backlog 3).
		"seventh admission ends it": {
			admitted: s(0.5, 0.1, 0.2, 0.3, 0.4, 2, 3.5, 4, 4.1, 4.2), total: 10, worth: 4,
			want: out{Rate: 2, Until: 3500 * time.Millisecond, OK: true},
		},
		// As deep as the quota exactly: the first admission ends it.
		"total equals worth": {admitted: s(2, 1), total: 4, worth: 4, want: out{Rate: 1, Until: time.Second, OK: true}},
		"never deep":         {admitted: s(1, 2), total: 3, worth: 4},
		"not far enough":     {admitted: s(1, 2), total: 10, worth: 4},
		"no quota":           {admitted: s(1, 2), total: 2, worth: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rate, until, ok := deepRate(tc.admitted, tc.total, tc.worth)
			if diff := cmp.Diff(tc.want, out{rate, until, ok}); diff != "" {
				t.Errorf("deepRate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuotaFilled(t *testing.T) {
	type out struct {
		At time.Duration
		OK bool
	}
	cases := map[string]struct {
		admitted []time.Duration
		worth    int
		want     out
	}{
		"third":    {admitted: []time.Duration{3, 1, 2, 5}, worth: 3, want: out{At: 3, OK: true}},
		"never":    {admitted: []time.Duration{3, 1}, worth: 3},
		"no quota": {admitted: []time.Duration{3, 1}, worth: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			at, ok := quotaFilled(tc.admitted, tc.worth)
			if diff := cmp.Diff(tc.want, out{at, ok}); diff != "" {
				t.Errorf("quotaFilled (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeepRateBound(t *testing.T) {
	type out struct {
		Rate float64
		OK   bool
	}
	cases := map[string]struct {
		total, worth int
		runtime      time.Duration
		want         out
	}{
		// The deep load: 1,500 workloads, 600 at once; the 901st comes one runtime in.
		"deep":         {total: 1500, worth: 600, runtime: 2 * time.Second, want: out{Rate: 450.5, OK: true}},
		"three waves":  {total: 10, worth: 3, runtime: time.Second, want: out{Rate: 4, OK: true}},
		"one wave":     {total: 5, worth: 3, runtime: time.Second},
		"shallow load": {total: 2, worth: 3, runtime: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rate, ok := deepRateBound(tc.total, tc.worth, tc.runtime)
			if diff := cmp.Diff(tc.want, out{rate, ok}); diff != "" {
				t.Errorf("deepRateBound (-want +got):\n%s", diff)
			}
		})
	}
}

// existingClient refuses every Create as AlreadyExists.
type existingClient struct{ client.Client }

func (existingClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return apierrors.NewAlreadyExists(schema.GroupResource{}, obj.GetName())
}

func TestGeneratorClientFlavorExists(t *testing.T) {
	c := generatorClient{Client: existingClient{}}
	got := map[string]bool{
		"ResourceFlavor": c.Create(context.Background(), &kueue.ResourceFlavor{}) == nil,
		"ClusterQueue":   c.Create(context.Background(), clusterQueue(kueue.PreemptionPolicyLowerPriority)) == nil,
	}
	if diff := cmp.Diff(map[string]bool{"ResourceFlavor": true, "ClusterQueue": false}, got); diff != "" {
		t.Errorf("creations that succeed (-want +got):\n%s", diff)
	}
}

func TestPrintSummary(t *testing.T) {
	vs, err := variants([]string{"upstream", "heads"}, time.Minute, 32)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(v variant, round int, admittedSecs, rate float64) *result {
		took := time.Duration(admittedSecs * float64(time.Second))
		return &result{variant: v, round: round, lastAdmitted: took, recorded: took, deepRate: rate, admitted: 100, apiCPU: 2 * time.Second,
			counts:  managerCounts{Cycles: map[string]int{"success": 8, "inadmissible": 2}, CycleSeconds: admittedSecs / 10},
			summary: recorder.Summary{WorkloadClasses: map[string]*recorder.WorkloadsClassSummary{"deep": {AverageTimeToAdmissionMs: 1000}}}}
	}
	var out bytes.Buffer
	printSummary(&out, []*result{
		mk(vs[0], 0, 10, 5), mk(vs[1], 0, 5, 50),
		mk(vs[1], 1, 4, 40), mk(vs[0], 1, 10, 4),
	}, []string{"deep"}, 3*time.Second, 90)
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if name, rest, ok := strings.Cut(strings.TrimSpace(line), "  "); ok {
			rows[name] = strings.Fields(rest)
		}
	}
	want := map[string][]string{
		// Medians over the two rounds; the bound beside the times and the rate; ratios per round
		// (0.5, 0.4 and 10, 10), then their median.
		"median over rounds":      {"upstream", "heads", "capacity", "bound", "heads/upstream"},
		"all admitted":            {"10.0", "s", "4.5", "s", "3.0", "s", "0.45x"},
		"all finished":            {"0.0", "s", "0.0", "s", "3.0", "s", "-"},
		"avg admission deep":      {"1.0", "s", "1.0", "s", "1.00x"},
		"quota filled":            {"0.0", "s", "0.0", "s", "-"},
		"admissions/s while deep": {"4.5/s", "45.0/s", "90.0/s", "10.00x"},
		// 100 admissions in 10 s, and in 5 and 4 s; a cycle is a tenth of the time; the API server
		// spent 2 s of CPU in each run.
		"admissions/s":     {"10.0/s", "22.5/s", "2.25x"},
		"mean cycle":       {"100.0", "ms", "45.0", "ms", "0.45x"},
		"API server cores": {"0.20", "0.45", "2.25x"},
		"manager CPU":      {"0.0", "s", "0.0", "s", "-"},
		"manager max RSS":  {"0", "MB", "0", "MB", "-"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("summary rows (-want +got):\n%s\n%s", diff, out.String())
	}
}

func TestSlowCycleLoad(t *testing.T) {
	never := []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyNever}
	cases := map[string]struct {
		scale                   float64
		wantRacks               int
		wantSetup, wantMeasured []shape
	}{
		"full": {
			scale:        1,
			wantRacks:    40,
			wantSetup:    []shape{{Class: "background", Queues: 20, Workloads: 250, Sets: 5, Quota: "250", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
			wantMeasured: []shape{{Class: "deep", Queues: 3, Workloads: 1000, Sets: 20, Quota: "1000", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
		},
		"0.1": {
			scale:        0.1,
			wantRacks:    4,
			wantSetup:    []shape{{Class: "background", Queues: 20, Workloads: 25, Sets: 5, Quota: "25", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
			wantMeasured: []shape{{Class: "deep", Queues: 3, Workloads: 100, Sets: 20, Quota: "100", Borrowing: "0", Request: "1", Runtime: 24 * time.Hour, Policies: never}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			setup, measured := slowCycleLoad(tc.scale)
			if diff := cmp.Diff(tc.wantSetup, shapeOf(setup)); diff != "" {
				t.Errorf("setup (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMeasured, shapeOf(measured)); diff != "" {
				t.Errorf("measured (-want +got):\n%s", diff)
			}
			// Every workload is placed by topology, on the flavor whose topology the setup creates.
			for _, cfg := range []*generator.Config{setup, measured} {
				if cfg.ResourceFlavor.TopologyName != setup.Topology.Name {
					t.Errorf("flavor %+v does not name the setup's topology %q", cfg.ResourceFlavor, setup.Topology.Name)
				}
				for _, ws := range cfg.Cohorts[0].QueuesSets[0].WorkloadsSets {
					if w := ws.Workloads[0]; w.TASConstraint != "required" || w.TASLevel != setup.Topology.Levels[1].NodeLabel {
						t.Errorf("workload template %+v is not required on a rack", w)
					}
				}
			}
			if got := setup.Topology.Levels[1].Count * setup.Topology.Levels[2].Count; got != tc.wantRacks*100 {
				t.Errorf("nodes = %d, want %d", got, tc.wantRacks*100)
			}
			// Quota for every workload: the measured part fills it and never waits for a finish.
			worth, err := quotaWorth(measured)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := workloadCount(measured); worth != n {
				t.Errorf("quota holds %d workloads, want all %d", worth, n)
			}
		})
	}
	l, err := buildLoad("slowcycle", "", "", "", 0.1)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Background          []string
		Hold, UntilAdmitted bool
		Topology            bool
	}
	if diff := cmp.Diff(got{Background: []string{"background"}, Hold: true, UntilAdmitted: true, Topology: true},
		got{l.background, l.hold, l.untilAdmitted, l.setup.Topology != nil}); diff != "" {
		t.Errorf("slow-cycle load (-want +got):\n%s", diff)
	}
	if _, err := buildLoad("slowcycle", "some.yaml", "", "", 1); err == nil {
		t.Error("a generator configuration was accepted for the slow-cycle load")
	}
}

func TestHeadsVariants(t *testing.T) {
	cases := map[string]struct {
		names     []string
		wantHeads map[string]int
		wantErr   bool
	}{
		"several values in one invocation": {
			names:     []string{"upstream", "off", "heads=8", "heads=32"},
			wantHeads: map[string]int{"upstream": 0, "off": 0, "heads=8": 8, "heads=32": 32},
		},
		"the -heads run beside them": {
			names:     []string{"heads", " heads=1"},
			wantHeads: map[string]int{"heads": 16, "heads=1": 1},
		},
		"zero":       {names: []string{"heads=0"}, wantErr: true},
		"not number": {names: []string{"heads=many"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vs, err := variants(tc.names, time.Minute, 16)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := map[string]int{}
			for _, v := range vs {
				got[v.name] = v.headsPerCycle
				if v.headsPerCycle > 1 && !strings.Contains(timeshareSection(v), fmt.Sprintf("headsPerCycle: %d", v.headsPerCycle)) {
					t.Errorf("variant %s: configuration %q does not set headsPerCycle", v.name, timeshareSection(v))
				}
			}
			if diff := cmp.Diff(tc.wantHeads, got); diff != "" {
				t.Errorf("headsPerCycle by variant (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGeneratorClientHold(t *testing.T) {
	cases := map[string]struct {
		hold bool
		want *kueue.StopPolicy
	}{
		"held":     {hold: true, want: ptr.To(kueue.Hold)},
		"not held": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			capture := &captureClient{}
			cq := clusterQueue(kueue.PreemptionPolicyLowerPriority)
			if err := (generatorClient{Client: capture, hold: tc.hold}).Create(context.Background(), cq); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cq.Spec.StopPolicy); diff != "" {
				t.Errorf("stopPolicy (-want +got):\n%s", diff)
			}
		})
	}
}

// -load large plays upstream's configs/large-scale from the Kueue module: ten cohorts of 100
// ClusterQueues; -scale thins each workloads set, never the queues.
func TestBuildLoadLarge(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("finding the Kueue module: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	cases := map[string]struct {
		scale                            float64
		wantWorkloads, wantClusterQueues int
	}{
		"full size": {scale: 1, wantWorkloads: 50000, wantClusterQueues: 1000},
		"at 0.1":    {scale: 0.1, wantWorkloads: 7000, wantClusterQueues: 1000},
		"at 0.01":   {scale: 0.01, wantWorkloads: 3000, wantClusterQueues: 1000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := buildLoad("large", "", dir, "kueue", tc.scale)
			if err != nil {
				t.Fatal(err)
			}
			w, cqs := workloadCount(l.cfg)
			if diff := cmp.Diff([2]int{tc.wantWorkloads, tc.wantClusterQueues}, [2]int{w, cqs}); diff != "" {
				t.Errorf("workloads and ClusterQueues (-want +got):\n%s", diff)
			}
			if !strings.Contains(l.shown, "large-scale") {
				t.Errorf("the report names %q, not upstream's large-scale configuration", l.shown)
			}
		})
	}
}
