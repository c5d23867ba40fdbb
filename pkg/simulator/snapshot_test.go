package simulator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
)

// midRotation is three same-priority workloads taking turns on one CPU, taken five minutes into
// the cluster's life: a holds the quota since 3m before the start, c was rotated out 3m before
// the start, b has waited since its creation and never ran.
const midRotation = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 5m}}
---
simulation: {until: 20m}
workloads:
  - {name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m, quotaReserved: -3m}}
  - {name: b, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m}}
  - {name: c, clusterQueue: cq, resources: {cpu: 1}, duration: 1h, snapshot: {created: -10m, preempted: {at: -3m, reason: InClusterQueueTimeBased}}}
`

func TestRunStartsMidFlight(t *testing.T) {
	cases := map[string]struct {
		scenario string
		want     []string
	}{
		"the holder's window counts from its reservation; the one that waited longest takes the next turn": {
			scenario: midRotation,
			want: []string{
				"+-3m a admitted",
				"+2m a preempted by b (InClusterQueueTimeBased)", "+2m b admitted",
				"+7m b preempted by c (InClusterQueueTimeBased)", "+7m c admitted",
				"+12m c preempted by a (InClusterQueueTimeBased)", "+12m a admitted",
				"+17m a preempted by b (InClusterQueueTimeBased)", "+17m b admitted",
			},
		},
		"a holder finishes its duration after its reservation, and one that ran past it finishes at the start": {
			scenario: strings.NewReplacer("duration: 1h, snapshot: {created: -10m, quotaReserved: -3m}", "duration: 2m, snapshot: {created: -10m, quotaReserved: -3m}",
				"withinClusterQueueConfig: {minAdmitDuration: 5m}", "withinClusterQueueConfig: {minAdmitDuration: 30m}").Replace(midRotation),
			want: []string{"+-3m a admitted", "+0s a finished", "+0s b admitted"},
		},
		"a flavor given for the holder's reservation": {
			scenario: strings.NewReplacer("metadata: {name: f}\n", "metadata: {name: f}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: g}\n",
				"flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]", "flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}, {name: g, resources: [{name: cpu, nominalQuota: 1}]}]",
				"quotaReserved: -3m}", "quotaReserved: -3m, flavors: {cpu: g}}").Replace(midRotation),
			// a holds g: b takes f at once; c waits for a turn in either.
			want: []string{"+-3m a admitted", "+0s b admitted",
				"+2m a preempted by c (InClusterQueueTimeBased)", "+2m c admitted",
				"+5m b preempted by a (InClusterQueueTimeBased)", "+5m a admitted",
				"+7m c preempted by b (InClusterQueueTimeBased)", "+7m b admitted",
				"+10m a preempted by c (InClusterQueueTimeBased)", "+10m c admitted",
				"+12m b preempted by a (InClusterQueueTimeBased)", "+12m a admitted",
				"+15m c preempted by b (InClusterQueueTimeBased)", "+15m b admitted",
				"+17m a preempted by c (InClusterQueueTimeBased)", "+17m c admitted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRun(t, mustParse(t, tc.scenario), ModeTimeshare)
			if diff := cmp.Diff(tc.want, story(r)); diff != "" {
				t.Errorf("story (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMidFlightWaitsIncludeThePast(t *testing.T) {
	r := mustRun(t, mustParse(t, midRotation), ModeTimeshare)
	got := map[string][2]string{}
	for _, w := range r.Workloads {
		got[w.Name] = [2]string{FormatOffset(w.TotalWait), FormatOffset(w.LongestWait)}
	}
	want := map[string][2]string{
		// a: 7m from its creation to its reservation, 10m between its turns, 3m until the end.
		"a": {"20m", "10m"},
		// b: 12m from its creation to its turn at +2m, then 10m.
		"b": {"22m", "12m"},
		// c: 10m from its preemption before the start to its turn at +7m (what it did before
		// that preemption is not known), then 8m from +12m to the end.
		"c": {"18m", "10m"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestParseRejectsBadSnapshots(t *testing.T) {
	cases := map[string]struct {
		replace [2]string
		want    []string
	}{
		"created after the start": {
			replace: [2]string{"snapshot: {created: -10m}", "snapshot: {created: 1m}"},
			want:    []string{"s.yaml:15: workloads[1].snapshot.created: must not be after the start (zero or negative), not 1m0s"},
		},
		"reserved before it was created": {
			replace: [2]string{"quotaReserved: -3m", "quotaReserved: -20m"},
			want:    []string{"s.yaml:14: workloads[0].snapshot.quotaReserved: must not be before snapshot.created (-10m0s), not -20m0s"},
		},
		"an arrival too": {
			replace: [2]string{"{name: b, clusterQueue: cq,", "{name: b, arrival: 1m, clusterQueue: cq,"},
			want:    []string{"s.yaml:15: workloads[1].arrival: a workload with a snapshot is already in the cluster and arrives at the start; leave arrival out"},
		},
		"a preemption of a holder": {
			replace: [2]string{"quotaReserved: -3m}", "quotaReserved: -3m, preempted: {at: -4m, reason: InClusterQueueTimeBased}}"},
			want:    []string{"s.yaml:14: workloads[0].snapshot.preempted: only applies to a pending workload (Kueue clears the Preempted condition when it reserves quota again)"},
		},
		"flavors of a pending workload": {
			replace: [2]string{"snapshot: {created: -10m}", "snapshot: {created: -10m, flavors: {cpu: f}}"},
			want:    []string{"s.yaml:15: workloads[1].snapshot.flavors: only applies with quotaReserved"},
		},
		"a flavor without quota": {
			replace: [2]string{"quotaReserved: -3m}", "quotaReserved: -3m, flavors: {cpu: g}}"},
			want:    []string{`s.yaml:14: workloads[0].snapshot.flavors[cpu]: ClusterQueue cq has no quota for cpu in flavor "g"`},
		},
		"a preemption without a reason": {
			replace: [2]string{"preempted: {at: -3m, reason: InClusterQueueTimeBased}", "preempted: {at: -3m}"},
			want:    []string{"s.yaml:16: workloads[2].snapshot.preempted.reason: required"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			text := strings.Replace(midRotation, tc.replace[0], tc.replace[1], 1)
			if text == midRotation {
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

func TestEncodeReadsBack(t *testing.T) {
	for _, text := range []string{midRotation, minimal} {
		s := mustParse(t, text)
		data, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("test.yaml", data)
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		if diff := cmp.Diff(s, back, scenarioOptions...); diff != "" {
			t.Errorf("read back (-parsed +encoded and parsed):\n%s", diff)
		}
	}
}

var scenarioOptions = cmp.Options{
	cmpopts.IgnoreUnexported(Scenario{}),
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
}
