package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/workload"
)

func TestQuotaToHold(t *testing.T) {
	cpu := resources.FlavorResource{Flavor: testFlavor, Resource: corev1.ResourceCPU}
	cases := map[string]struct {
		quota     []string // nominal, borrowing limit
		usedCPU   string   // held by a running workload
		mode      flavorassigner.FlavorAssignmentMode
		borrowing int
		want      int64 // milli-cpu held, of 3000 requested
	}{
		"a fit holds everything":                            {quota: []string{"2"}, mode: flavorassigner.Fit, borrowing: 1, want: 3000},
		"no borrowing: up to the free nominal quota":        {quota: []string{"4"}, usedCPU: "2", mode: flavorassigner.Preempt, want: 2000},
		"no borrowing, nominal used up: nothing":            {quota: []string{"4"}, usedCPU: "4", mode: flavorassigner.Preempt, want: 0},
		"no borrowing, above nominal already: nothing":      {quota: []string{"1"}, usedCPU: "2", mode: flavorassigner.Preempt, want: 0},
		"borrowing without a limit: everything":             {quota: []string{"1"}, usedCPU: "1", mode: flavorassigner.Preempt, borrowing: 1, want: 3000},
		"borrowing with a limit: up to the limit":           {quota: []string{"2", "2"}, usedCPU: "2", mode: flavorassigner.Preempt, borrowing: 1, want: 2000},
		"borrowing with a limit above the request: all":     {quota: []string{"2", "5"}, usedCPU: "1", mode: flavorassigner.Preempt, borrowing: 1, want: 3000},
		"borrowing past the limit already: a negative hold": {quota: []string{"1", "1"}, usedCPU: "3", mode: flavorassigner.Preempt, borrowing: 1, want: -1000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", tc.quota...).Cohort("co").Obj(), cpuQueue("lender", "10").Cohort("co").Obj()}}
			if tc.usedCPU != "" {
				objs.workloads = append(objs.workloads, running(cpuWorkload("used", "cq", tc.usedCPU), "cq"))
			}
			w := newWorld(t, objs)
			cq := w.snapshot().ClusterQueue("cq")
			a := flavorassigner.Assignment{
				PodSets:   []flavorassigner.PodSetAssignment{{Name: kueue.DefaultPodSetName}},
				Borrowing: tc.borrowing,
				Usage:     workload.Usage{Quota: resources.FlavorResourceQuantities{cpu: resources.NewAmount(3000)}},
			}
			a.SetRepresentativeMode(tc.mode)
			e := &entry{clusterQueueSnapshot: cq, assignment: a}
			got := quotaResourcesToReserve(e, cq)
			want := resources.FlavorResourceQuantities{cpu: resources.NewAmount(tc.want)}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(resources.Amount{})); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPenaltyResourceFilter(t *testing.T) {
	groups := []schdcache.ResourceGroup{
		{CoveredResources: sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory)},
		{CoveredResources: sets.New[corev1.ResourceName]("example.com/gpu")},
	}
	covered := allCoveredResources(groups)
	if diff := cmp.Diff([]corev1.ResourceName{"cpu", "example.com/gpu", "memory"}, sets.List(covered)); diff != "" {
		t.Errorf("covered (-want +got):\n%s", diff)
	}
	list := corev1.ResourceList{
		corev1.ResourceCPU:     resourceQuantity("2"),
		"example.com/gpu":      resourceQuantity("1"),
		"example.com/unknown":  resourceQuantity("7"),
		corev1.ResourceStorage: resourceQuantity("1Gi"),
	}
	got := filterByNames(list, covered)
	want := corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("2"), "example.com/gpu": resourceQuantity("1")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("filtered (-want +got):\n%s", diff)
	}
	if len(list) != 4 {
		t.Errorf("the input list was changed: %v", list)
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
