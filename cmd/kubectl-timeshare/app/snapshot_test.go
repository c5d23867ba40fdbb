package app

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

var scenarioCmp = []cmp.Option{
	cmpopts.IgnoreUnexported(simulator.Scenario{}),
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmpopts.EquateEmpty(),
}

// cpuWorkload is a one-pod workload of LocalQueue lq asking for cpu, created at created.
func cpuWorkload(name string, created time.Duration, cpu string) kueue.Workload {
	return kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: *mt(created)},
		Spec: kueue.WorkloadSpec{QueueName: "lq", PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		}}}}},
	}
}

func withCondition(wl kueue.Workload, t string, status metav1.ConditionStatus, reason string, at time.Duration) kueue.Workload {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, LastTransitionTime: *mt(at)})
	return wl
}

func reserved(wl kueue.Workload, at time.Duration, flavor string) kueue.Workload {
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "turns", PodSetAssignments: []kueue.PodSetAssignment{{
		Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{corev1.ResourceCPU: kueue.ResourceFlavorReference(flavor)}}}}
	wl = withCondition(wl, kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", at)
	return withCondition(wl, kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", at)
}

func finishedAfter(wl kueue.Workload, ran time.Duration) kueue.Workload {
	wl = reserved(wl, -5*time.Hour, "default")
	return withCondition(wl, kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", -5*time.Hour+ran)
}

func d(x time.Duration) simulator.Duration   { return simulator.Duration{Duration: x} }
func dp(x time.Duration) *simulator.Duration { return &simulator.Duration{Duration: x} }
func q(s string) simulator.Quantity          { return simulator.Quantity{Quantity: resource.MustParse(s)} }

func TestRuntimeFor(t *testing.T) {
	annotated := func(v string) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annotations.ExpectedRuntime: v}}}
	}
	cases := map[string]struct {
		wl     *kueue.Workload
		assume time.Duration
		median time.Duration
		want   RuntimeChoice
		ok     bool
	}{
		"the annotation wins over --assume-runtime and the median": {
			wl: annotated("3h"), assume: time.Hour, median: 2 * time.Hour,
			want: RuntimeChoice{Runtime: 3 * time.Hour, Source: RuntimeFromAnnotation}, ok: true,
		},
		"--assume-runtime without an annotation": {
			wl: &kueue.Workload{}, assume: time.Hour, median: 2 * time.Hour,
			want: RuntimeChoice{Runtime: time.Hour, Source: RuntimeAssumed}, ok: true,
		},
		"an annotation the manager would not use counts as none": {
			wl: annotated("soon"), assume: time.Hour,
			want: RuntimeChoice{Runtime: time.Hour, Source: RuntimeAssumed}, ok: true,
		},
		"the median of finished workloads last": {
			wl: &kueue.Workload{}, median: 2 * time.Hour,
			want: RuntimeChoice{Runtime: 2 * time.Hour, Source: RuntimeMedian + " (3)"}, ok: true,
		},
		"nothing known": {wl: &kueue.Workload{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := runtimeFor(tc.wl, tc.assume, tc.median, 3)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("runtime (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFinishedMedian(t *testing.T) {
	cases := map[string]struct {
		wls       []kueue.Workload
		want      time.Duration
		wantCount int
	}{
		"none finished": {wls: []kueue.Workload{cpuWorkload("a", -time.Hour, "1")}},
		"the middle one of three": {
			wls:  []kueue.Workload{finishedAfter(cpuWorkload("a", -6*time.Hour, "1"), 3*time.Hour), finishedAfter(cpuWorkload("b", -6*time.Hour, "1"), time.Hour), finishedAfter(cpuWorkload("c", -6*time.Hour, "1"), 2*time.Hour)},
			want: 2 * time.Hour, wantCount: 3,
		},
		"the lower middle one of two; running workloads do not count": {
			wls:  []kueue.Workload{finishedAfter(cpuWorkload("a", -6*time.Hour, "1"), 3*time.Hour), finishedAfter(cpuWorkload("b", -6*time.Hour, "1"), time.Hour), reserved(cpuWorkload("c", -6*time.Hour, "1"), -time.Hour, "default")},
			want: time.Hour, wantCount: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, n := finishedMedian(tc.wls)
			if got != tc.want || n != tc.wantCount {
				t.Errorf("finishedMedian = %s of %d, want %s of %d", got, n, tc.want, tc.wantCount)
			}
		})
	}
}

func TestBuildScenario(t *testing.T) {
	turns := object("ClusterQueue", "turns", map[string]any{
		"cohortName":        "team",
		"queueingStrategy":  "BestEffortFIFO",
		"namespaceSelector": map[string]any{},
		"resourceGroups": []any{map[string]any{"coveredResources": []any{"cpu"}, "flavors": []any{
			map[string]any{"name": "default", "resources": []any{map[string]any{"name": "cpu", "nominalQuota": "2", "borrowingLimit": "1"}}},
		}}},
		"preemption": map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"},
			"preemptMinRuntime":        "10m",
			"noticePeriod":             "2m",
		},
	})
	team := object("Cohort", "team", map[string]any{"preemption": map[string]any{"reclaimMinRuntime": "1h", "noticeOnReclaim": true}})
	base := func() *Snapshot {
		return &Snapshot{
			Now:           t0,
			Flavors:       []kueue.ResourceFlavor{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
			Cohorts:       []unstructured.Unstructured{team},
			ClusterQueues: []unstructured.Unstructured{turns},
			LocalQueues: []kueue.LocalQueue{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "turns"}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphan"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "gone"}},
			},
			WorkloadPriorityClasses: []kueue.WorkloadPriorityClass{{ObjectMeta: metav1.ObjectMeta{Name: "batch", Annotations: map[string]string{
				"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "100", "unrelated": "x"}}, Value: 10}},
			PriorityClasses: []schedulingv1.PriorityClass{{ObjectMeta: metav1.ObjectMeta{Name: "critical"}, Value: 1000}, {ObjectMeta: metav1.ObjectMeta{Name: "unused"}, Value: 5}},
		}
	}
	wantQueues := func(sc *simulator.Scenario) *simulator.Scenario {
		sc.Simulation.Start = &simulator.Time{Time: t0}
		sc.Name = "cluster at 2026-11-24T12:00:00Z"
		sc.Description = "Saved by kubectl timeshare what-if: the cluster's queues and unfinished workloads, starting where they were."
		sc.Flavors = []*kueue.ResourceFlavor{{TypeMeta: kueueMeta("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
		wantTeam, wantTurns := team.DeepCopy(), turns.DeepCopy()
		// What the simulator does not model is left out.
		unstructured.RemoveNestedField(wantTurns.Object, "spec", "namespaceSelector")
		sc.Cohorts, sc.ClusterQueues = []*unstructured.Unstructured{wantTeam}, []*unstructured.Unstructured{wantTurns}
		sc.LocalQueues = []*kueue.LocalQueue{{TypeMeta: kueueMeta("LocalQueue"), ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "turns"}}}
		sc.WorkloadPriorityClasses = []*kueue.WorkloadPriorityClass{{TypeMeta: kueueMeta("WorkloadPriorityClass"), ObjectMeta: metav1.ObjectMeta{Name: "batch", Annotations: map[string]string{
			"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "100"}}, Value: 10}}
		return sc
	}
	// The holder's notice and checkpoint-done are left out of its annotations: the notice names
	// the preemptor by a UID no simulated workload has.
	noticeDropped := "workload ns/holder is under a preemption notice, which the simulation does not carry: its preemptor chooses again"
	unknownDefaults := "the manager's timeshare defaults are not known (pass --manager-config): the simulation uses the defaults of an empty timeshare section"

	holder := reserved(cpuWorkload("holder", -time.Hour, "1"), -3*time.Minute, "default")
	holder.Annotations = map[string]string{annotations.ExpectedRuntime: "2h", annotations.RequeueNotBefore: "2026-11-24T11:00:00Z", "other": "dropped",
		annotations.CheckpointDone: "true"}
	for k, v := range (annotations.Notice{Start: t0.Add(-time.Minute), Deadline: t0.Add(time.Minute), Reason: "InClusterQueueTimeBased",
		Preemptor: "ns/rotated", PreemptorUID: "uid-of-the-cluster"}).Annotations() {
		holder.Annotations[k] = v
	}
	rotated := withCondition(cpuWorkload("rotated", -time.Hour, "1"), kueue.WorkloadPreempted, metav1.ConditionTrue, "InClusterQueueTimeBased", -8*time.Minute)
	critical := cpuWorkload("critical", -30*time.Minute, "500m")
	critical.Spec.PriorityClassRef = kueue.NewPodPriorityClassRef("critical")
	critical.Spec.PodSets[0].Count = 3
	deactivated := cpuWorkload("off", -time.Minute, "1")
	deactivated.Spec.Active = ptr.To(false)
	lost := cpuWorkload("lost", -time.Minute, "1")
	lost.Spec.QueueName = "orphan"

	cases := map[string]struct {
		snap     func(*Snapshot)
		opts     ScenarioOptions
		want     *simulator.Scenario
		runtimes map[string]RuntimeChoice
		notes    []string
		err      string
	}{
		"holders start admitted since their reservation, pending ones keep their last preemption": {
			snap: func(s *Snapshot) {
				s.Workloads = []kueue.Workload{rotated, critical, holder, finishedAfter(cpuWorkload("done", -7*time.Hour, "1"), 90*time.Minute), deactivated, lost}
			},
			opts: ScenarioOptions{For: 24 * time.Hour},
			want: wantQueues(&simulator.Scenario{
				Simulation: simulator.Simulation{Until: dp(24 * time.Hour)},
				Objects: simulator.Objects{PriorityClasses: []*schedulingv1.PriorityClass{{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
					ObjectMeta: metav1.ObjectMeta{Name: "critical"}, Value: 1000}}},
				// In creation order (then UID): holder and rotated were created together.
				Workloads: []simulator.Workload{
					{Name: "holder", Namespace: "ns", Queue: "lq", Pods: 1, Resources: map[string]simulator.Quantity{"cpu": q("1")}, Duration: d(2 * time.Hour),
						Annotations: map[string]string{annotations.ExpectedRuntime: "2h"},
						Snapshot:    &simulator.WorkloadSnapshot{Created: d(-time.Hour), QuotaReserved: dp(-3 * time.Minute), Flavors: map[string]string{"cpu": "default"}}},
					{Name: "rotated", Namespace: "ns", Queue: "lq", Pods: 1, Resources: map[string]simulator.Quantity{"cpu": q("1")}, Duration: d(90 * time.Minute),
						Snapshot: &simulator.WorkloadSnapshot{Created: d(-time.Hour), Preempted: &simulator.PastPreemption{At: d(-8 * time.Minute), Reason: "InClusterQueueTimeBased"}}},
					{Name: "critical", Namespace: "ns", Queue: "lq", PriorityClass: "critical", Pods: 3, Resources: map[string]simulator.Quantity{"cpu": q("500m")}, Duration: d(90 * time.Minute),
						Snapshot: &simulator.WorkloadSnapshot{Created: d(-30 * time.Minute)}},
				},
			}),
			runtimes: map[string]RuntimeChoice{
				"ns/holder":   {Runtime: 2 * time.Hour, Source: RuntimeFromAnnotation},
				"ns/rotated":  {Runtime: 90 * time.Minute, Source: RuntimeMedian + " (1)"},
				"ns/critical": {Runtime: 90 * time.Minute, Source: RuntimeMedian + " (1)"},
			},
			notes: []string{unknownDefaults, noticeDropped, `workload ns/lost is left out: its LocalQueue "orphan" does not exist or points to no ClusterQueue`,
				"workload ns/off is deactivated and left out"},
		},
		"the manager's configuration and --assume-runtime": {
			snap: func(s *Snapshot) { s.Workloads = []kueue.Workload{holder, rotated} },
			opts: ScenarioOptions{AssumeRuntime: 45 * time.Minute, Manager: ManagerSettings{Known: true,
				Config:       tsconfig.Configuration{DefaultPreemptMinRuntime: &metav1.Duration{Duration: time.Minute}, ReclaimResolveMethod: tsconfig.ReclaimResolveQueue},
				FeatureGates: map[string]bool{"MinRuntimeProtection": false, "PrioritizePreemptorWorkloads": false, "SomeKueueGate": true},
				FairSharing:  &simulator.FairSharing{PreemptionStrategies: []string{"LessThanInitialShare"}}}},
			want: wantQueues(&simulator.Scenario{
				FeatureGates: map[string]bool{"MinRuntimeProtection": false, "PrioritizePreemptorWorkloads": false},
				FairSharing:  &simulator.FairSharing{PreemptionStrategies: []string{"LessThanInitialShare"}},
				Timeshare:    simulator.Timeshare{Configuration: tsconfig.Configuration{DefaultPreemptMinRuntime: &metav1.Duration{Duration: time.Minute}, ReclaimResolveMethod: "Queue"}},
				Workloads: []simulator.Workload{
					{Name: "holder", Namespace: "ns", Queue: "lq", Pods: 1, Resources: map[string]simulator.Quantity{"cpu": q("1")}, Duration: d(2 * time.Hour),
						Annotations: map[string]string{annotations.ExpectedRuntime: "2h"},
						Snapshot:    &simulator.WorkloadSnapshot{Created: d(-time.Hour), QuotaReserved: dp(-3 * time.Minute), Flavors: map[string]string{"cpu": "default"}}},
					{Name: "rotated", Namespace: "ns", Queue: "lq", Pods: 1, Resources: map[string]simulator.Quantity{"cpu": q("1")}, Duration: d(45 * time.Minute),
						Snapshot: &simulator.WorkloadSnapshot{Created: d(-time.Hour), Preempted: &simulator.PastPreemption{At: d(-8 * time.Minute), Reason: "InClusterQueueTimeBased"}}},
				},
			}),
			runtimes: map[string]RuntimeChoice{
				"ns/holder":  {Runtime: 2 * time.Hour, Source: RuntimeFromAnnotation},
				"ns/rotated": {Runtime: 45 * time.Minute, Source: RuntimeAssumed},
			},
			notes: []string{noticeDropped},
		},
		"resources without quota and priority classes that are gone": {
			snap: func(s *Snapshot) {
				withMemory := cpuWorkload("mem", -time.Hour, "1")
				withMemory.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
				withMemory.Spec.PriorityClassRef = kueue.NewWorkloadPriorityClassRef("deleted")
				onlyGPU := cpuWorkload("gpu", -time.Hour, "1")
				onlyGPU.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
				s.Workloads = []kueue.Workload{withMemory, onlyGPU}
			},
			opts: ScenarioOptions{AssumeRuntime: time.Hour},
			want: wantQueues(&simulator.Scenario{
				Workloads: []simulator.Workload{
					{Name: "mem", Namespace: "ns", Queue: "lq", Pods: 1, Resources: map[string]simulator.Quantity{"cpu": q("1")}, Duration: d(time.Hour),
						Snapshot: &simulator.WorkloadSnapshot{Created: d(-time.Hour)}},
				},
			}),
			runtimes: map[string]RuntimeChoice{"ns/mem": {Runtime: time.Hour, Source: RuntimeAssumed}},
			notes: []string{unknownDefaults,
				"workload ns/gpu asks for nvidia.com/gpu, which ClusterQueue turns has no quota for: simulated without it, as when the manager's resources.excludeResourcePrefixes leaves it out (otherwise Kueue never admits the workload)",
				"workload ns/gpu is left out: it asks for nothing ClusterQueue turns has quota for",
				"workload ns/mem asks for memory, which ClusterQueue turns has no quota for: simulated without it, as when the manager's resources.excludeResourcePrefixes leaves it out (otherwise Kueue never admits the workload)",
				`workload ns/mem names WorkloadPriorityClass "deleted", which is not in the cluster: simulated at priority 0`,
			},
		},
		"no run time known": {
			snap: func(s *Snapshot) { s.Workloads = []kueue.Workload{rotated, holder, critical} },
			err:  "no run time is known for ns/rotated, ns/critical: no kueue-timeshare.io/expected-runtime annotation, no --assume-runtime, and no finished workload in the cluster to take a median from; pass --assume-runtime",
		},
		"nothing to simulate": {
			snap: func(s *Snapshot) { s.Workloads = []kueue.Workload{deactivated} },
			err:  "nothing to simulate: no unfinished workload is queued in a LocalQueue of a ClusterQueue",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := base()
			tc.snap(snap)
			got, err := BuildScenario(snap, tc.opts)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Scenario, scenarioCmp...); diff != "" {
				t.Errorf("scenario (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.runtimes, got.Runtimes); diff != "" {
				t.Errorf("runtimes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.notes, got.Notes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			// What --save-scenario writes (Kueue's manifests and the workloads) is a scenario the
			// simulator accepts, and stands for the same objects and workloads.
			data, err := got.Scenario.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := simulator.Parse("saved.yaml", data)
			if err != nil {
				t.Fatalf("the saved scenario does not parse:\n%v\n%s", err, data)
			}
			built := got.Scenario.Objects
			if diff := cmp.Diff([]any{built.Flavors, built.Cohorts, built.LocalQueues, built.WorkloadPriorityClasses, built.PriorityClasses},
				[]any{back.Flavors, back.Cohorts, back.LocalQueues, back.WorkloadPriorityClasses, back.PriorityClasses}, scenarioCmp...); diff != "" {
				t.Errorf("objects saved and read back (-built +read):\n%s", diff)
			}
			// Read back, a ClusterQueue also has the schema's defaults.
			for i, cq := range built.ClusterQueues {
				if !contains(cq.Object["spec"], back.ClusterQueues[i].Object["spec"]) {
					t.Errorf("ClusterQueue %s saved and read back: %v, not within %v", cq.GetName(), cq.Object["spec"], back.ClusterQueues[i].Object["spec"])
				}
			}
			if diff := cmp.Diff(got.Scenario.WorkloadSpecs(), back.WorkloadSpecs(), append(scenarioCmp, cmpopts.IgnoreUnexported(simulator.WorkloadSpec{}))...); diff != "" {
				t.Errorf("workloads saved and read back (-built +read):\n%s", diff)
			}
			for _, kind := range []string{"kind: ResourceFlavor", "kind: Cohort", "kind: ClusterQueue", "kind: LocalQueue", "kind: WorkloadPriorityClass"} {
				if !strings.Contains(string(data), kind) {
					t.Errorf("the saved scenario has no %s:\n%s", kind, data)
				}
			}
		})
	}
}

// contains reports whether b has every field of a, with the same value.
func contains(a, b any) bool {
	am, ok := a.(map[string]any)
	if !ok {
		return cmp.Equal(a, b)
	}
	bm, ok := b.(map[string]any)
	for k, v := range am {
		if !ok || !contains(v, bm[k]) {
			return false
		}
	}
	return ok
}

func TestReadProposal(t *testing.T) {
	cq := `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: turns}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 1}]}]
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    withinClusterQueueConfig: {minAdmitDuration: %s}
`
	config := "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare:\n  defaultPreemptMinRuntime: 30m\nfeatureGates:\n  TimeBasedSamePriorityPreemption: false\n"
	cases := map[string]struct {
		file    string
		changes []string
		err     string
	}{
		"a ClusterQueue and a manager configuration": {
			file:    strings.Replace(cq, "%s", "10m", 1) + "---\n" + config,
			changes: []string{"ClusterQueue turns", "the manager configuration's timeshare section and feature gates"},
		},
		"a List of a Cohort": {
			file:    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: kueue.x-k8s.io/v1beta2\n  kind: Cohort\n  metadata: {name: team}\n  spec: {preemption: {reclaimMinRuntime: 1h}}\n",
			changes: []string{"Cohort team"},
		},
		"a window the webhook refuses": {
			file: strings.Replace(cq, "%s", "30s", 1),
			err:  `p.yaml: document 1 (ClusterQueue turns): the ClusterQueue webhook would reject it: ClusterQueue.kueue.x-k8s.io "turns" is invalid: spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: "30s": must be at least 1m0s`,
		},
		"a min-runtime the Cohort webhook refuses": {
			file: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: team}\nspec: {preemption: {reclaimMinRuntime: -1h}}\n",
			err:  `p.yaml: document 1 (Cohort team): the Cohort webhook would reject it: Cohort.kueue.x-k8s.io "team" is invalid: spec.preemption.reclaimMinRuntime: Invalid value: "-1h0m0s": must not be negative`,
		},
		"a misspelt field": {
			file: strings.Replace(strings.Replace(cq, "%s", "10m", 1), "  preemption:", "  preemtion: {}\n  preemption:", 1),
			err:  `p.yaml: document 1 (ClusterQueue turns): spec.preemtion: unknown field "spec.preemtion"`,
		},
		"a bad manager configuration": {
			file: "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\ntimeshare: {reclaimResolveMethod: Root}\n",
			err:  `p.yaml: document 1 (Configuration ): timeshare.reclaimResolveMethod: Unsupported value: "Root": supported values: "LCA", "Queue"`,
		},
		"another kind": {
			file: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\n",
			err:  `p.yaml: document 1 (LocalQueue lq): kind "LocalQueue" cannot be proposed: use ClusterQueue or Cohort`,
		},
		"nothing": {
			file: "# empty\n",
			err:  "p.yaml: proposes nothing: expected ClusterQueue or Cohort manifests (kueue.x-k8s.io/v1beta2) or a manager Configuration with a timeshare section",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ReadProposal("p.yaml", []byte(tc.file))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v\nwant    %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.changes, p.Changes()); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProposalApply(t *testing.T) {
	current, err := simulator.Parse("current", []byte(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: turns}
spec:
  cohortName: team
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2}]}]}]
---
workloads:
  - {name: a, clusterQueue: turns, resources: {cpu: 1}, duration: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	cq := func(flavor, cohort string) string {
		return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: turns}\nspec:\n  cohortName: " + cohort +
			"\n  resourceGroups: [{coveredResources: [cpu], flavors: [{name: " + flavor + ", resources: [{name: cpu, nominalQuota: 4}]}]}]\n"
	}
	cases := map[string]struct {
		file       string
		wantQuota  string
		wantCohort string
		err        string
	}{
		"a ClusterQueue replaces the cluster's": {file: cq("default", "team"), wantQuota: "4", wantCohort: "team"},
		"a new Cohort with it": {
			file:      cq("default", "lab") + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: lab}\nspec: {preemption: {reclaimMinRuntime: 1h}}\n",
			wantQuota: "4", wantCohort: "lab",
		},
		"a flavor the cluster does not have": {
			file: cq("h100", "team"),
			err:  `p.yaml: the proposal does not fit the cluster: ClusterQueue turns: spec.resourceGroups[0].flavors[0].name: ResourceFlavor "h100" is not declared`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := ReadProposal("p.yaml", []byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.apply("p.yaml", current)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v\nwant    %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.ClusterQueues) != 1 {
				t.Fatalf("ClusterQueues = %v", got.ClusterQueues)
			}
			var typed kueue.ClusterQueue
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.ClusterQueues[0].Object, &typed); err != nil {
				t.Fatal(err)
			}
			q := typed.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota
			if q.String() != tc.wantQuota || string(typed.Spec.CohortName) != tc.wantCohort {
				t.Errorf("ClusterQueue = %+v, want quota %s in %s", got.ClusterQueues[0], tc.wantQuota, tc.wantCohort)
			}
			if diff := cmp.Diff(current.WorkloadSpecs(), got.WorkloadSpecs(), append(scenarioCmp, cmpopts.IgnoreUnexported(simulator.WorkloadSpec{}))...); diff != "" {
				t.Errorf("workloads changed (-current +proposed):\n%s", diff)
			}
		})
	}
}

func TestCompareRuns(t *testing.T) {
	built := &SnapshotScenario{
		Scenario: &simulator.Scenario{Simulation: simulator.Simulation{Start: &simulator.Time{Time: t0}}, Workloads: []simulator.Workload{
			{Name: "a", Snapshot: &simulator.WorkloadSnapshot{QuotaReserved: dp(0)}},
			{Name: "b", Snapshot: &simulator.WorkloadSnapshot{}},
		}},
		Runtimes: map[string]RuntimeChoice{"ns/a": {Runtime: time.Hour, Source: RuntimeAssumed}, "ns/b": {Runtime: time.Hour, Source: RuntimeAssumed}},
	}
	ev := func(at time.Duration, kind simulator.EventKind, wl, by string) simulator.Event {
		return simulator.Event{At: at, Kind: kind, Workload: wl, ClusterQueue: "cq", By: by}
	}
	run := func(events ...simulator.Event) *simulator.Result {
		return &simulator.Result{Start: t0, ClusterQueues: []simulator.QueueResult{{Name: "cq", Workloads: 2}},
			Workloads: []simulator.WorkloadResult{{Name: "a", Namespace: "ns", ClusterQueue: "cq"}, {Name: "b", Namespace: "ns", ClusterQueue: "cq"}},
			Events:    append([]simulator.Event{ev(-time.Hour, simulator.EventArrived, "a", ""), ev(-time.Hour, simulator.EventArrived, "b", ""), ev(0, simulator.EventAdmitted, "a", "")}, events...)}
	}
	dec := func(at time.Duration, kind, wl, by string) SimDecision {
		return SimDecision{At: *mt(at), Kind: kind, Workload: wl, ClusterQueue: "cq", By: by}
	}
	cases := map[string]struct {
		cur, prop    *simulator.Result
		wantNext     [2]*SimDecision
		wantFirstDif *Divergence
	}{
		"the same decisions; a holder reserved at the start is not its next admission": {
			cur:      run(ev(5*time.Minute, simulator.EventPreempted, "a", "b"), ev(5*time.Minute, simulator.EventAdmitted, "b", "")),
			prop:     run(ev(5*time.Minute, simulator.EventPreempted, "a", "b"), ev(5*time.Minute, simulator.EventAdmitted, "b", "")),
			wantNext: [2]*SimDecision{ptr.To(dec(5*time.Minute, "admitted", "b", "")), ptr.To(dec(5*time.Minute, "admitted", "b", ""))},
		},
		"they part; a holder admitted again later is a next admission": {
			cur: run(ev(5*time.Minute, simulator.EventFinished, "a", ""), ev(5*time.Minute, simulator.EventAdmitted, "b", "")),
			prop: run(ev(5*time.Minute, simulator.EventPreempted, "a", "b"), ev(5*time.Minute, simulator.EventAdmitted, "b", ""),
				ev(10*time.Minute, simulator.EventPreempted, "b", "a"), ev(10*time.Minute, simulator.EventAdmitted, "a", "")),
			wantNext: [2]*SimDecision{ptr.To(dec(5*time.Minute, "admitted", "b", "")), ptr.To(dec(5*time.Minute, "admitted", "b", ""))},
			wantFirstDif: &Divergence{
				Current:  []SimDecision{dec(5*time.Minute, "finished", "a", ""), dec(5*time.Minute, "admitted", "b", "")},
				Proposed: []SimDecision{dec(5*time.Minute, "preempted", "a", "b"), dec(5*time.Minute, "admitted", "b", ""), dec(10*time.Minute, "preempted", "b", "a"), dec(10*time.Minute, "admitted", "a", "")},
			},
		},
		"a holder evicted and admitted again: that admission is the next": {
			cur:      run(ev(time.Minute, simulator.EventEvicted, "a", ""), ev(2*time.Minute, simulator.EventAdmitted, "a", "")),
			prop:     run(ev(time.Minute, simulator.EventEvicted, "a", ""), ev(2*time.Minute, simulator.EventAdmitted, "a", "")),
			wantNext: [2]*SimDecision{ptr.To(dec(2*time.Minute, "admitted", "a", "")), ptr.To(dec(2*time.Minute, "admitted", "a", ""))},
		},
		"nothing more happens in one of them": {
			cur:      run(),
			prop:     run(ev(time.Minute, simulator.EventFinished, "a", "")),
			wantNext: [2]*SimDecision{nil, nil},
			wantFirstDif: &Divergence{
				Current:  []SimDecision{},
				Proposed: []SimDecision{dec(time.Minute, "finished", "a", "")},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rep := compareRuns(time.Hour, built, tc.cur, tc.prop, "")
			if diff := cmp.Diff(tc.wantNext, [2]*SimDecision{rep.ClusterQueues[0].Current.NextAdmitted, rep.ClusterQueues[0].Proposed.NextAdmitted}); diff != "" {
				t.Errorf("next admitted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFirstDif, rep.FirstDifference); diff != "" {
				t.Errorf("first difference (-want +got):\n%s", diff)
			}
		})
	}
}
