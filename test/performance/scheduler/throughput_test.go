package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/recorder"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/stats"
)

// These tests check the benchmark's own pieces; the benchmark itself runs only from
// `make bench-throughput`.

func testConfig() *generator.Config {
	return &generator.Config{Cohorts: []generator.CohortSet{{
		ClassName: "cohort", Count: 2,
		QueuesSets: []generator.QueuesSet{{
			ClassName: "cq", Count: 3, NominalQuota: "20", BorrowingLimit: "100",
			ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority,
			WorkloadsSets: []generator.WorkloadsSet{
				{Count: 10, Workloads: []generator.WorkloadTemplate{{ClassName: "small", Request: "1"}}},
				{Count: 3, Workloads: []generator.WorkloadTemplate{{ClassName: "large", Request: "20"}}},
			},
		}},
	}}}
}

func TestPrepareConfig(t *testing.T) {
	base := testConfig()
	vs, err := variants(nil, time.Minute, 32)
	if err != nil {
		t.Fatal(err)
	}
	on := vs[2]
	cfg, err := prepareConfig(base, 0.25, on)
	if err != nil {
		t.Fatal(err)
	}
	qs := cfg.Cohorts[0].QueuesSets[0]
	if got := []int{qs.WorkloadsSets[0].Count, qs.WorkloadsSets[1].Count}; got[0] != 3 || got[1] != 1 {
		t.Errorf("scaled counts = %v, want [3 1]", got)
	}
	if qs.WithinClusterQueue != kueue.PreemptionPolicyLowerOrNewerEqualPriority {
		t.Errorf("withinClusterQueue = %s with a window", qs.WithinClusterQueue)
	}
	if base.Cohorts[0].QueuesSets[0].WorkloadsSets[0].Count != 10 || base.Cohorts[0].QueuesSets[0].WithinClusterQueue != kueue.PreemptionPolicyLowerPriority {
		t.Error("the base configuration was modified")
	}
	full, err := prepareConfig(base, 1, vs[1])
	if err != nil {
		t.Fatal(err)
	}
	if w, cqs := workloadCount(full); w != 2*3*13 || cqs != 6 {
		t.Errorf("workloadCount = %d, %d; want 78, 6", w, cqs)
	}
	if full.Cohorts[0].QueuesSets[0].WithinClusterQueue != kueue.PreemptionPolicyLowerPriority {
		t.Error("the policy changed without a window")
	}
	if got := workloadClasses(full); strings.Join(got, ",") != "small,large" {
		t.Errorf("classes = %v", got)
	}
	if _, err := variants([]string{"upstream", "nope"}, time.Minute, 32); err == nil {
		t.Error("an unknown variant was accepted")
	}
}

// captureClient records what is created.
type captureClient struct {
	client.Client
	created []client.Object
}

func (c *captureClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	c.created = append(c.created, obj)
	return nil
}

func clusterQueue(policy kueue.PreemptionPolicy) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{}
	cq.Name = "cq-0-0-cohort-0"
	cq.Spec.CohortName = "cohort-0"
	cq.Spec.Preemption = &kueue.ClusterQueuePreemption{WithinClusterQueue: policy, ReclaimWithinCohort: kueue.PreemptionPolicyAny}
	return cq
}

func TestGeneratorClient(t *testing.T) {
	ctx := context.Background()
	capture := &captureClient{}
	c := generatorClient{Client: capture, window: time.Minute}
	cq := clusterQueue(kueue.PreemptionPolicyLowerOrNewerEqualPriority)
	if err := c.Create(ctx, cq); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	u, ok := capture.created[0].(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("ClusterQueue sent as %T", capture.created[0])
	}
	if d, _, _ := unstructured.NestedString(u.Object, "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration"); d != "1m0s" {
		t.Errorf("minAdmitDuration = %q", d)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "preemption", "withinClusterQueue"); p != string(kueue.PreemptionPolicyLowerOrNewerEqualPriority) {
		t.Errorf("withinClusterQueue = %q", p)
	}
	if got := u.GetFinalizers(); len(got) != 1 || got[0] != kueue.ResourceInUseFinalizerName {
		t.Errorf("finalizers = %v", got)
	}
	if capture.created[1] != ns {
		t.Error("a Namespace was not passed through")
	}

	if err := c.Create(ctx, clusterQueue(kueue.PreemptionPolicyLowerPriority)); err == nil {
		t.Error("minAdmitDuration accepted under LowerPriority; our webhook refuses it")
	}

	plain := generatorClient{Client: capture}
	cq = clusterQueue(kueue.PreemptionPolicyLowerPriority)
	if err := plain.Create(ctx, cq); err != nil {
		t.Fatal(err)
	}
	if capture.created[len(capture.created)-1] != cq || len(cq.Finalizers) != 1 {
		t.Error("without a window the typed ClusterQueue should go through, with the finalizer")
	}
}

func TestReport(t *testing.T) {
	vs, err := variants(nil, time.Minute, 32)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(v variant, admitted time.Duration, smallMs int64, cpuMs int64) *result {
		return &result{
			variant: v, workloads: 10, finished: 10, lastAdmitted: admitted, lastFinished: admitted + time.Second,
			summary: recorder.Summary{
				WorkloadClasses: map[string]*recorder.WorkloadsClassSummary{"small": {Count: 10, AverageTimeToAdmissionMs: smallMs}},
				ClusterQueueClasses: map[string]*recorder.CQGroupSummary{"cq": {
					CPUUsed: 50_000_000, NominalQuota: 1000, // half of 1000 mCPU over 100 s
					FirstEventTime: time.Unix(0, 0), LastEventTime: time.Unix(100, 0),
				}},
			},
			manager: stats.CmdStats{UserMs: cpuMs, Maxrss: 1024},
		}
	}
	var out bytes.Buffer
	printReport(&out, []*result{mk(vs[0], 10*time.Second, 2000, 1000), mk(vs[1], 11*time.Second, 3000, 1000), mk(vs[2], 10*time.Second, 1000, 2000)}, []string{"small"})
	text := out.String()
	for _, want := range []string{"off/upstream", "on/upstream", "1.10x", "1.50x", "0.50x", "2.00x", "50.0%", "1 MB"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "scheduler CPU") {
		t.Errorf("CPU shares reported without profiles:\n%s", text)
	}
}

func TestMedianOverRounds(t *testing.T) {
	vs, err := variants([]string{"upstream", "off"}, time.Minute, 32)
	if err != nil {
		t.Fatal(err)
	}
	var results []*result
	for round, secs := range []float64{1.0, 1.2, 1.6} { // ratios off/upstream of "all admitted"
		results = append(results,
			&result{variant: vs[0], round: round, lastAdmitted: 10 * time.Second},
			&result{variant: vs[1], round: round, lastAdmitted: time.Duration(secs * 10 * float64(time.Second))},
		)
	}
	var out bytes.Buffer
	printReport(&out, results, nil)
	text := out.String()
	for _, want := range []string{"off/upstream, round 3", "off/upstream, median", "1.20x", "round 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median = %g", m)
	}
}

func TestRequestCounts(t *testing.T) {
	w, r := requestCounts(map[string]int{"status patch Workload": 5, "get Workload": 2, "list WorkloadList": 1, "status get Workload": 1, "delete Workload": 3})
	if w != 8 || r != 4 {
		t.Errorf("writes, reads = %d, %d; want 8, 4", w, r)
	}
}

func TestTimeshareSection(t *testing.T) {
	vs, err := variants([]string{"off", "heads0", "est0"}, time.Minute, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"off":    "",
		"heads0": "timeshare:\n  headsPerCycle: 32\n  pendingStatusWriters: 0\n",
		"est0":   "timeshare:\n  admissionEstimates:\n    refreshInterval: 0s\n",
	}
	got := map[string]string{}
	for _, v := range vs {
		got[v.name] = timeshareSection(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeshare sections (-want +got):\n%s", diff)
	}
}
