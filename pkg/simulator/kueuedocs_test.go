package simulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// manifests is midRotation's queues as Kueue's manifests, with the scenario's own document last.
const manifests = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: f
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources:
      - name: cpu
        nominalQuota: 1
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    withinClusterQueueConfig:
      minAdmitDuration: 5m
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: cq
spec:
  clusterQueue: cq
---
simulation: {until: 20m}
workloads:
  - {name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m, quotaReserved: -3m}}
  - {name: b, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m}}
  - {name: c, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m, preempted: {at: -3m, reason: InClusterQueueTimeBased}}}
`

func TestManifestScenariosRunAsTheirPlainForm(t *testing.T) {
	plain := mustRun(t, mustParse(t, midRotation), ModeTimeshare)
	cases := map[string]string{
		"one document per object": manifests,
		"a List": "apiVersion: v1\nkind: List\nitems:\n" + indentItems(strings.SplitN(manifests, "\n---\nsimulation:", 2)[0]) +
			"---\nsimulation:" + strings.SplitN(manifests, "\n---\nsimulation:", 2)[1],
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRun(t, mustParse(t, text), ModeTimeshare)
			if diff := cmp.Diff(story(plain), story(r)); diff != "" {
				t.Errorf("story (-plain +manifests):\n%s", diff)
			}
		})
	}
}

// indentItems turns YAML documents into the items of a List.
func indentItems(docs string) string {
	var b strings.Builder
	for _, doc := range strings.Split(docs, "\n---\n") {
		for i, line := range strings.Split(strings.TrimSpace(doc), "\n") {
			prefix := "  "
			if i == 0 {
				prefix = "- "
			}
			b.WriteString(prefix + line + "\n")
		}
	}
	return b.String()
}

// TestExamplesInManifestForm writes examples as Kueue's manifests and runs both: the same
// decisions at the same times.
func TestExamplesInManifestForm(t *testing.T) {
	for _, name := range []string{"min-runtime.yaml", "unfit-job.yaml", "gpu-data-scientists-notice.yaml"} {
		t.Run(name, func(t *testing.T) {
			s, err := Load(filepath.Join("..", "..", "examples", "scenarios", name))
			if err != nil {
				t.Fatal(err)
			}
			data, err := s.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(name, data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if diff := cmp.Diff(story(mustRun(t, s, ModeTimeshare)), story(mustRun(t, back, ModeTimeshare))); diff != "" {
				t.Errorf("story (-example +manifest form):\n%s", diff)
			}
		})
	}
}

func TestParseRejectsBadManifests(t *testing.T) {
	cases := map[string]struct {
		replace [2]string
		want    []string
	}{
		"an unknown field, at its line": {
			replace: [2]string{"  preemption:\n    withinClusterQueue:", "  preemtion: {}\n  preemption:\n    withinClusterQueue:"},
			want:    []string{`s.yaml:19: ClusterQueue cq: spec.preemtion: unknown field "spec.preemtion"`},
		},
		"a window the webhook rejects, in its words": {
			replace: [2]string{"minAdmitDuration: 5m", "minAdmitDuration: 30s"},
			want:    []string{`s.yaml:22: ClusterQueue cq: spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: "30s": must be at least 1m0s`},
		},
		"upstream's ClusterQueue validation": {
			replace: [2]string{"nominalQuota: 1", "nominalQuota: -1"},
			want:    []string{`s.yaml:18: ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": must be greater than or equal to 0`},
		},
		"a field the simulator does not model": {
			replace: [2]string{"  namespaceSelector: {}\n", "  namespaceSelector: {}\n  admissionChecksStrategy: {admissionChecks: [{name: prov}]}\n"},
			want:    []string{"s.yaml:12: ClusterQueue cq: spec.admissionChecksStrategy: not simulated; leave it out of a scenario"},
		},
		"a reference the scenario checks names the manifest": {
			replace: [2]string{"    - name: f\n      resources:", "    - name: g\n      resources:"},
			want:    []string{"s.yaml:15: ClusterQueue cq: spec.resourceGroups[0].flavors[0].name: ResourceFlavor \"g\" is not declared"},
		},
		"another kind": {
			replace: [2]string{"kind: LocalQueue", "kind: Workload"},
			want:    []string{"s.yaml:25: Workload cq: kind: Workload is not something a scenario holds; use ResourceFlavor, Cohort, ClusterQueue, LocalQueue or WorkloadPriorityClass"},
		},
		"a second document of the scenario's own": {
			replace: [2]string{"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n", ""},
			want:    []string{"s.yaml:30: a scenario has one document of its own fields (without apiVersion and kind); found a second one"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			text := strings.Replace(manifests, tc.replace[0], tc.replace[1], 1)
			if text == manifests {
				t.Fatalf("%q is not in the scenario", tc.replace[0])
			}
			_, err := Parse("s.yaml", []byte(text))
			if err == nil {
				t.Fatal("the scenario was accepted")
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExampleManifestScenario keeps the example written as Kueue's manifests running.
func TestExampleManifestScenario(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "examples", "scenarios", "kueue-manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, mustParse(t, string(text)), ModeTimeshare)
}

func TestCohortManifestsGetUpstreamsValidation(t *testing.T) {
	cohort := "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: lab}\nspec:\n  fairSharing: {weight: -1}\n---\n"
	_, err := Parse("s.yaml", []byte(cohort+manifests))
	if err == nil {
		t.Fatal("the scenario was accepted")
	}
	want := []string{`s.yaml:5: Cohort lab: spec.fairSharing: Invalid value: "-1": must be greater than or equal to 0`}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// A min-runtime set only in a ClusterQueue manifest ends at its time: the waiting workload is
// admitted then, not at the next unrelated event.
func TestManifestMinRuntimeWakesAtItsEnd(t *testing.T) {
	queues, _, _ := strings.Cut(manifests, "---\nsimulation:")
	queues = strings.Replace(queues, `    withinClusterQueue: LowerOrNewerEqualPriority
    withinClusterQueueConfig:
      minAdmitDuration: 5m`, `    withinClusterQueue: LowerPriority
    preemptMinRuntime: 7m`, 1)
	if !strings.Contains(queues, "preemptMinRuntime: 7m") {
		t.Fatal("the ClusterQueue manifest's preemption section changed; update this test")
	}
	text := queues + `---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
simulation: {until: 2h}
workloads:
  - {name: low, clusterQueue: cq, priorityClass: low, resources: {cpu: 1}, duration: 1h}
  - {name: high, clusterQueue: cq, priorityClass: high, arrival: 1m, resources: {cpu: 1}, duration: 10m}
`
	got := story(mustRun(t, mustParse(t, text), ModeTimeshare))
	want := []string{
		"+0s low admitted",
		"+7m low preempted by high (InClusterQueue)", "+7m high admitted",
		"+17m high finished", "+17m low admitted",
		"+1h17m low finished",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("story (-want +got):\n%s", diff)
	}
}
