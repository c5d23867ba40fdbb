package simulator

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

// minimal is the smallest valid scenario; the bad scenarios below change one thing in it.
const minimal = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
---
workloads:
  - name: a
    clusterQueue: cq
    resources: {cpu: 1}
    duration: 1m
`

func TestParseRejectsBadScenarios(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want []string
	}{
		"empty file":     {yaml: "", want: []string{"s.yaml: the file is empty"}},
		"only a comment": {yaml: "# nothing\n", want: []string{"s.yaml: the file is empty"}},
		"not YAML": {
			yaml: "workloads: [\n  - name: a\n",
			want: []string{"s.yaml:1: invalid YAML: did not find expected node content"},
		},
		"two documents": {
			yaml: minimal + "---\nname: again\n",
			want: []string{"s.yaml:17: a scenario has one document of its own fields (without apiVersion and kind); found a second one"},
		},
		"a list at the top": {
			yaml: "- a\n- b\n",
			want: []string{"s.yaml:1: must be a mapping of fields, not a list"},
		},
		"unknown top-level field": {
			yaml: strings.Replace(minimal, "workloads:", "flavours: []\nworkloads:", 1),
			want: []string{"s.yaml:11: flavours: unknown field"},
		},
		"unknown workload field names its line": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    colour: red\n", 1),
			want: []string{"s.yaml:16: workloads[0].colour: unknown field"},
		},
		"field set twice": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    duration: 2m\n", 1),
			want: []string{"s.yaml:16: workloads[0].duration: set twice (first on line 15)"},
		},
		"duration that is not one": {
			yaml: strings.Replace(minimal, "duration: 1m", "duration: soon", 1),
			want: []string{`s.yaml:15: workloads[0].duration: "soon" is not a duration (write it like 90s, 15m or 4h)`},
		},
		"negative duration": {
			yaml: strings.Replace(minimal, "duration: 1m", "duration: -1m", 1),
			want: []string{"s.yaml:15: workloads[0].duration: must be positive, not -1m0s"},
		},
		"missing duration": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "", 1),
			want: []string{"s.yaml:12: workloads[0].duration: required: the run time the workload needs to finish"},
		},
		"a list where a mapping is expected": {
			yaml: strings.Replace(minimal, "resources: {cpu: 1}\n    duration", "resources: [cpu]\n    duration", 1),
			want: []string{"s.yaml:14: workloads[0].resources: must be a mapping, not a list"},
		},
		"bad quantity": {
			yaml: strings.Replace(minimal, "    resources: {cpu: 1}\n    duration", "    resources: {cpu: lots}\n    duration", 1),
			want: []string{`s.yaml:14: workloads[0].resources[cpu]: "lots" is not a quantity (write it like 2, 500m or 8Gi)`},
		},
		"zero request": {
			yaml: strings.Replace(minimal, "    resources: {cpu: 1}\n    duration", "    resources: {cpu: 0}\n    duration", 1),
			want: []string{"s.yaml:14: workloads[0].resources[cpu]: must be positive"},
		},
		"resource the queue has no quota for": {
			yaml: strings.Replace(minimal, "    resources: {cpu: 1}\n    duration", "    resources: {memory: 1Gi}\n    duration", 1),
			want: []string{"s.yaml:14: workloads[0].resources[memory]: ClusterQueue cq has no quota for memory, so the workload could never be admitted"},
		},
		"boolean that is not one": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointed: yes please\n", 1),
			want: []string{`s.yaml:16: workloads[0].checkpointed: must be true or false, not "yes please"`},
		},
		"number that is not one": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    pods: two\n", 1),
			want: []string{"s.yaml:16: workloads[0].pods: must be a whole number, not \"two\""},
		},
		"unknown ClusterQueue": {
			yaml: strings.Replace(minimal, "clusterQueue: cq", "clusterQueue: nope", 1),
			want: []string{"s.yaml:13: workloads[0].clusterQueue: no ClusterQueue \"nope\""},
		},
		"neither queue nor ClusterQueue": {
			yaml: strings.Replace(minimal, "    clusterQueue: cq\n", "", 1),
			want: []string{"s.yaml:12: workloads[0].queue: required: a LocalQueue name (queue) or a ClusterQueue name (clusterQueue)"},
		},
		"both queue and ClusterQueue": {
			yaml: strings.Replace(minimal, "    clusterQueue: cq\n", "    clusterQueue: cq\n    queue: cq\n", 1),
			want: []string{"s.yaml:13: workloads[0].clusterQueue: set either queue (a LocalQueue) or clusterQueue, not both"},
		},
		"unknown LocalQueue": {
			yaml: strings.Replace(minimal, "    clusterQueue: cq\n", "    queue: team\n", 1),
			want: []string{"s.yaml:13: workloads[0].queue: no LocalQueue \"team\""},
		},
		"unknown priority class": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    priorityClass: high\n", 1),
			want: []string{"s.yaml:16: workloads[0].priorityClass: no WorkloadPriorityClass or PriorityClass \"high\""},
		},
		"unknown flavor": {
			yaml: strings.Replace(minimal, "flavors: [{name: f,", "flavors: [{name: g,", 1),
			want: []string{"s.yaml:9: ClusterQueue cq: spec.resourceGroups[0].flavors[0].name: ResourceFlavor \"g\" is not declared"},
		},
		"name the API would refuse": {
			yaml: strings.Replace(minimal, "name: cq}", "name: CQ_1}", 1),
			want: []string{"s.yaml:7: ClusterQueue CQ_1: metadata.name: \"CQ_1\" is not a valid name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
		},
		"negative quota, as upstream's webhook says": {
			yaml: strings.Replace(minimal, "nominalQuota: 1", "nominalQuota: -1", 1),
			want: []string{"s.yaml:9: ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"-1\": must be greater than or equal to 0"},
		},
		"minAdmitDuration under a minute, as our webhook says": {
			yaml: strings.Replace(minimal, "---\nworkloads:", "  preemption:\n    withinClusterQueue: LowerOrNewerEqualPriority\n    withinClusterQueueConfig: {minAdmitDuration: 30s}\n---\nworkloads:", 1),
			want: []string{"s.yaml:12: ClusterQueue cq: spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: \"30s\": must be at least 1m0s"},
		},
		"minAdmitDuration with the wrong policy": {
			yaml: strings.Replace(minimal, "---\nworkloads:", "  preemption:\n    withinClusterQueue: LowerPriority\n    withinClusterQueueConfig: {minAdmitDuration: 1h}\n---\nworkloads:", 1),
			want: []string{"s.yaml:12: ClusterQueue cq: spec.preemption.withinClusterQueueConfig: Invalid value: \"LowerPriority\": requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority"},
		},
		"unknown preemption policy": {
			yaml: strings.Replace(minimal, "---\nworkloads:", "  preemption:\n    withinClusterQueue: Sometimes\n---\nworkloads:", 1),
			want: []string{"s.yaml:11: ClusterQueue cq: spec.preemption.withinClusterQueue: \"Sometimes\" is not supported; use one of Never, LowerPriority, LowerOrNewerEqualPriority"},
		},
		"negative min-runtime on a Cohort": {
			yaml: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\nspec:\n  preemption: {reclaimMinRuntime: -5m}\n---\n" + minimal,
			want: []string{"s.yaml:5: Cohort org: spec.preemption.reclaimMinRuntime: Invalid value: \"-5m0s\": must not be negative"},
		},
		"Cohort cycle": {
			yaml: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: a}\nspec: {parentName: b}\n---\n" +
				"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: b}\nspec: {parentName: a}\n---\n" + minimal,
			want: []string{"s.yaml:4: Cohort a: spec.parentName: Cohort \"a\" is its own ancestor (the parents form a cycle)", "s.yaml:9: Cohort b: spec.parentName: Cohort \"b\" is its own ancestor (the parents form a cycle)"},
		},
		"toleration annotation that is not a number": {
			yaml: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: low\n  annotations:\n" +
				"    preemption-toleration.scheduling.x-k8s.io/toleration-seconds: an hour\nvalue: 1\n---\n" + minimal,
			want: []string{"s.yaml:6: WorkloadPriorityClass low: metadata.annotations[preemption-toleration.scheduling.x-k8s.io/toleration-seconds]: Invalid value: \"an hour\": must be a 64-bit integer (seconds; negative: forever)"},
		},
		"expected runtime that is not a duration": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    annotations:\n      kueue-timeshare.io/expected-runtime: ten minutes\n", 1),
			want: []string{`s.yaml:17: workloads[0].annotations[kueue-timeshare.io/expected-runtime]: annotation kueue-timeshare.io/expected-runtime: "ten minutes" is not a duration`},
		},
		"feature gate that is not ours": {
			yaml: strings.Replace(minimal, "workloads:", "featureGates: {TopologyAwareScheduling: true}\nworkloads:", 1),
			want: []string{"s.yaml:11: featureGates[TopologyAwareScheduling]: not a feature gate a scenario may set; use one of TimeBasedSamePriorityPreemption, ExpectedRuntimeRequeue, MinRuntimeProtection, PreemptionToleration, PreemptionNotice, PreemptionBudget, PrioritizePreemptorWorkloads"},
		},
		"bad reclaim resolve method": {
			yaml: strings.Replace(minimal, "workloads:", "timeshare: {reclaimResolveMethod: Root}\nworkloads:", 1),
			want: []string{`s.yaml:11: timeshare.reclaimResolveMethod: Unsupported value: "Root": supported values: "LCA", "Queue"`},
		},
		"the timeshare section is read by the manager's decoder, field by field": {
			yaml: strings.Replace(minimal, "workloads:", "timeshare:\n  defaultNoticePeriod: soon\n  headsPerCycle: two\n  colour: red\nworkloads:", 1),
			want: []string{
				`s.yaml:12: timeshare.defaultNoticePeriod: time: invalid duration "soon"`,
				"s.yaml:13: timeshare.headsPerCycle: headsPerCycle must be a whole number, not a string",
				`s.yaml:14: timeshare.colour: unknown field "colour"`,
			},
		},
		"the timeshare section's runtimeClock PodsReady is not simulated": {
			yaml: strings.Replace(minimal, "workloads:", "timeshare: {runtimeClock: PodsReady}\nworkloads:", 1),
			want: []string{"s.yaml:11: timeshare.runtimeClock: PodsReady is not simulated (no Pod becomes ready); leave it out of a scenario"},
		},
		"duplicate workload names from copies": {
			yaml: minimal + "  - name: a\n    clusterQueue: cq\n    resources: {cpu: 1}\n    duration: 1m\n",
			want: []string{"s.yaml:16: workloads[1].name: workload default/a is declared twice (first at workloads[0])"},
		},
		"every without copies": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    every: 5m\n", 1),
			want: []string{"s.yaml:16: workloads[0].every: only applies with copies greater than 1"},
		},
		"a checkpoint interval that is not positive": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointInterval: 0s\n", 1),
			want: []string{"s.yaml:16: workloads[0].checkpointInterval: must be positive, not 0s"},
		},
		"a negative checkpoint duration": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointInterval: 10m\n    checkpointDuration: -1s\n", 1),
			want: []string{"s.yaml:17: workloads[0].checkpointDuration: must not be negative, not -1s"},
		},
		"a checkpoint duration without an interval": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointDuration: 1m\n", 1),
			want: []string{"s.yaml:16: workloads[0].checkpointDuration: only applies with checkpointInterval"},
		},
		"a checkpoint interval beside checkpointed": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointed: true\n    checkpointInterval: 10m\n", 1),
			want: []string{"s.yaml:17: workloads[0].checkpointInterval: not with checkpointed: true, which keeps all progress at every eviction; use one or the other"},
		},
		"a checkpoint interval that is not a duration": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    checkpointInterval: hourly\n", 1),
			want: []string{"s.yaml:16: workloads[0].checkpointInterval: \"hourly\" is not a duration (write it like 90s, 15m or 4h)"},
		},
		"a notice written by hand": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    annotations:\n      kueue-timeshare.io/preemption-deadline: \"2026-11-25T10:00:00Z\"\n", 1),
			want: []string{"s.yaml:17: workloads[0].annotations[kueue-timeshare.io/preemption-deadline]: written by the manager, not by a scenario"},
		},
		"too many copies": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    copies: 1000000\n", 1),
			want: []string{"s.yaml:16: workloads[0].copies: the scenario would have 1000000 workloads; the simulator takes at most 100000"},
		},
		"an alias to the wrong kind of node": {
			yaml: strings.Replace(minimal, "workloads:", "simulation: &s {until: *s}\nworkloads:", 1),
			want: []string{"s.yaml:11: simulation.until: must be a single value, not a mapping"},
		},
		"a mapping where a quantity is expected": {
			yaml: strings.Replace(minimal, "    resources: {cpu: 1}\n    duration", "    resources: {cpu: {nominal: 1}}\n    duration", 1),
			want: []string{"s.yaml:14: workloads[0].resources[cpu]: must be a single value, not a mapping"},
		},
		"no queues": {
			yaml: "workloads: [{name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 1m}]\n",
			want: []string{"s.yaml: at least one ResourceFlavor is required", "s.yaml: at least one ClusterQueue is required"},
		},
		"the short form of Kueue's objects": {
			yaml: strings.Replace(minimal, "workloads:", "clusterQueues: [{name: cq}]\nworkloads:", 1),
			want: []string{"s.yaml:11: clusterQueues: the short form of Kueue's objects is no longer read; write them as manifests (see docs/simulator.md; kubectl timeshare what-if --save-scenario writes them)"},
		},
		"negative pod count": {
			yaml: strings.Replace(minimal, "    duration: 1m\n", "    duration: 1m\n    pods: -3\n", 1),
			want: []string{"s.yaml:16: workloads[0].pods: must be at least 1, not -3"},
		},
		"two problems in one ClusterQueue's settings, each at its field": {
			yaml: strings.Replace(minimal, "---\nworkloads:", "  preemption:\n    withinClusterQueue: LowerOrNewerEqualPriority\n    withinClusterQueueConfig: {minAdmitDuration: 30s}\n    reclaimMinRuntime: -1m\n---\nworkloads:", 1),
			want: []string{"s.yaml:12: ClusterQueue cq: spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: \"30s\": must be at least 1m0s", "s.yaml:13: ClusterQueue cq: spec.preemption.reclaimMinRuntime: Invalid value: \"-1m0s\": must not be negative"},
		},
		"several problems are all reported, in line order": {
			yaml: strings.Replace(strings.Replace(minimal, "duration: 1m", "duration: soon", 1), "workloads:", "flavours: []\nworkloads:", 1),
			want: []string{
				"s.yaml:11: flavours: unknown field",
				`s.yaml:16: workloads[0].duration: "soon" is not a duration (write it like 90s, 15m or 4h)`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("the scenario was accepted")
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseReadsEveryField(t *testing.T) {
	const text = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  preemption: {preemptMinRuntime: 30m, reclaimMinRuntime: 1h}
  fairSharing: {weight: 2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec:
  parentName: org
  resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: team
  queueingStrategy: StrictFIFO
  resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2, lendingLimit: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 10}, withinClusterQueueConfig: {minAdmitDuration: 4h}, preemptMinRuntime: 1h, reclaimMinRuntime: 2h}
  fairSharing: {weight: 1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec:
  clusterQueue: cq
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low, annotations: {preemption-toleration.scheduling.x-k8s.io/toleration-seconds: "600"}}
value: 10
---
name: every-field
simulation:
  start: 2026-03-01T08:00:00Z
  until: 12h
  schedulingInterval: 2s
featureGates: {ExpectedRuntimeRequeue: false}
fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}
timeshare:
  defaultPreemptMinRuntime: 5m
  defaultReclaimMinRuntime: 10m
  reclaimResolveMethod: Queue
  defaultRequeueDelay: 15m
workloads:
  - name: job
    queue: lq
    namespace: team-a
    arrival: 1m
    priorityClass: low
    pods: 2
    resources: {nvidia.com/gpu: 1}
    duration: 3h
    checkpointed: true
    annotations: {kueue-timeshare.io/expected-runtime: 2h}
    copies: 2
    every: 30m
`
	s, err := Parse("every.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	base := WorkloadSpec{
		Namespace: "team-a", LocalQueue: "lq", ClusterQueue: "cq", Duration: 3 * time.Hour, Checkpointed: true,
		Pods: 2, Requests: gpu, PriorityClass: "low", PriorityKind: kueue.PodPriorityClassKind, Priority: 10,
		Annotations: map[string]string{"kueue-timeshare.io/expected-runtime": "2h"},
	}
	first, second := base, base
	first.Name, first.Arrival = "job-1", time.Minute
	second.Name, second.Arrival = "job-2", 31*time.Minute
	opts := cmp.Options{cmpopts.IgnoreUnexported(WorkloadSpec{}), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })}
	if diff := cmp.Diff([]WorkloadSpec{first, second}, s.WorkloadSpecs(), opts); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}

	objs := s.Objects
	cq, err := typedObject[kueue.ClusterQueue](objs.ClusterQueues[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&kueue.ClusterQueuePreemption{
		WithinClusterQueue:  kueue.PreemptionPolicyLowerOrNewerEqualPriority,
		ReclaimWithinCohort: kueue.PreemptionPolicyAny,
		BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority, MaxPriorityThreshold: ptrTo[int32](10)},
	}, cq.Spec.Preemption); diff != "" {
		t.Errorf("Kueue's view of the preemption (-want +got):\n%s", diff)
	}
	if cq.Spec.QueueingStrategy != kueue.StrictFIFO || cq.Spec.CohortName != "team" {
		t.Errorf("strategy %s, cohort %s", cq.Spec.QueueingStrategy, cq.Spec.CohortName)
	}
	q := cq.Spec.ResourceGroups[0].Flavors[0].Resources[0]
	if q.NominalQuota.String() != "4" || q.BorrowingLimit.String() != "2" || q.LendingLimit.String() != "1" {
		t.Errorf("quota %+v", q)
	}
	ext := objs.ClusterQueues[0].Object["spec"].(map[string]any)["preemption"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"minAdmitDuration": "4h"}, ext["withinClusterQueueConfig"]); diff != "" {
		t.Errorf("our fields on the raw ClusterQueue (-want +got):\n%s", diff)
	}
	if len(objs.PriorityClasses) != 1 || len(objs.WorkloadPriorityClasses) != 0 || objs.Namespaces[0].Name != "team-a" {
		t.Errorf("objects: %d PriorityClasses, %d WorkloadPriorityClasses, namespaces %v", len(objs.PriorityClasses), len(objs.WorkloadPriorityClasses), objs.Namespaces)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestTimeshareOf: a saved scenario keeps what a simulation reads of the manager's timeshare
// section and leaves out what it does not model.
func TestTimeshareOf(t *testing.T) {
	minute := &metav1.Duration{Duration: time.Minute}
	cases := map[string]struct {
		in   tsconfig.Configuration
		want tsconfig.Configuration
	}{
		"the runtime clock, metrics, admission estimates and the handover hold's bound are left out": {
			in: tsconfig.Configuration{DefaultPreemptMinRuntime: minute, RuntimeClock: tsconfig.RuntimeClockPodsReady,
				Metrics: tsconfig.Metrics{LongWaitThreshold: minute}, AdmissionEstimates: tsconfig.AdmissionEstimates{RefreshInterval: minute},
				MaxHandoverHold: minute},
			want: tsconfig.Configuration{DefaultPreemptMinRuntime: minute},
		},
		"an empty section stays empty": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TimeshareOf(&tc.in).Configuration); diff != "" {
				t.Errorf("TimeshareOf (-want +got):\n%s", diff)
			}
		})
	}
}
