package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	controllerconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/features"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// variant is a concurrent-admission variant of parent, pinned to flavor.
func variant(name, parent, flavor string) *testingwrappers.WorkloadWrapper {
	wl := cpuWorkload(name, "cq", "1").UID(types.UID(name)).
		Annotation(controllerconstants.WorkloadAllowedResourceFlavorAnnotation, flavor)
	wl.OwnerReferences = append(wl.OwnerReferences, metav1.OwnerReference{
		APIVersion: kueue.SchemeGroupVersion.String(), Kind: "Workload", Name: parent, UID: types.UID(parent),
	})
	return wl
}

func threeFlavorQueue() *testingwrappers.ClusterQueueWrapper {
	return testingwrappers.MakeClusterQueue("cq").ResourceGroup(
		*testingwrappers.MakeFlavorQuotas("f1").Resource(corev1.ResourceCPU, "4").Obj(),
		*testingwrappers.MakeFlavorQuotas("f2").Resource(corev1.ResourceCPU, "4").Obj(),
		*testingwrappers.MakeFlavorQuotas("f3").Resource(corev1.ResourceCPU, "4").Obj(),
	)
}

func TestAdmittedSibling(t *testing.T) {
	cases := map[string]struct {
		gateOff  bool
		admitted []*kueue.Workload
		self     *kueue.Workload
		want     string // admitted sibling found looking for a more favorable one
		wantLess string // ... and for a less favorable one
	}{
		"better sibling admitted": {
			admitted: []*kueue.Workload{running(variant("on-f1", "p", "f1"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
			want:     "on-f1",
		},
		"worse sibling admitted": {
			admitted: []*kueue.Workload{running(variant("on-f3", "p", "f3"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
			wantLess: "on-f3",
		},
		"same flavor is neither": {
			admitted: []*kueue.Workload{running(variant("other-f2", "p", "f2"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
		},
		"another parent's variant is no sibling": {
			admitted: []*kueue.Workload{running(variant("on-f1", "q", "f1"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
		},
		"a sibling on a flavor the ClusterQueue lacks is ignored": {
			admitted: []*kueue.Workload{running(variant("on-f9", "p", "f9"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
		},
		"a sibling holding quota but not admitted is ignored": {
			admitted: []*kueue.Workload{variant("on-f1", "p", "f1").SimpleReserveQuota("cq", "f1", t0).Obj()},
			self:     variant("on-f2", "p", "f2").Obj(),
		},
		"not a variant": {
			admitted: []*kueue.Workload{running(variant("on-f1", "p", "f1"), "cq")},
			self:     cpuWorkload("plain", "cq", "1").Obj(),
		},
		"gate off": {
			gateOff:  true,
			admitted: []*kueue.Workload{running(variant("on-f1", "p", "f1"), "cq")},
			self:     variant("on-f2", "p", "f2").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.ConcurrentAdmission, !tc.gateOff)
			w := newWorld(t, worldObjects{
				flavors:       []string{"f1", "f2", "f3"},
				clusterQueues: []*kueue.ClusterQueue{threeFlavorQueue().Obj()},
				workloads:     tc.admitted,
			})
			s, _ := w.scheduler()
			snap := w.snapshot()
			info := &workload.Info{Obj: tc.self, ClusterQueue: "cq"}
			nameOf := func(wl *workload.Info) string {
				if wl == nil {
					return ""
				}
				return wl.Obj.Name
			}
			got := []string{nameOf(s.findAdmittedMoreFavorableSibling(info, snap)), nameOf(s.findAdmittedLessFavorableSibling(info, snap))}
			if diff := cmp.Diff([]string{tc.want, tc.wantLess}, got); diff != "" {
				t.Errorf("siblings [more, less favorable] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMigrationAllowed(t *testing.T) {
	cases := map[string]struct {
		lastAcceptable string
		self           *kueue.Workload
		want           bool
		wantMessage    string
	}{
		"no constraint": {
			self: variant("v", "p", "f3").Obj(),
			want: true,
		},
		"at the last acceptable flavor": {
			lastAcceptable: "f2",
			self:           variant("v", "p", "f2").Obj(),
			want:           true,
		},
		"above it": {
			lastAcceptable: "f2",
			self:           variant("v", "p", "f1").Obj(),
			want:           true,
		},
		"below it": {
			lastAcceptable: "f2",
			self:           variant("v", "p", "f3").Obj(),
			wantMessage:    "Target flavor is below LastAcceptableFlavorName",
		},
		"variant without a flavor": {
			lastAcceptable: "f2",
			self:           cpuWorkload("v", "cq", "1").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The cache keeps the policy only with the gate on.
			features.SetFeatureGateDuringTest(t, features.ConcurrentAdmission, true)
			cq := threeFlavorQueue()
			if tc.lastAcceptable != "" {
				cq = cq.LastAcceptableFlavorName(tc.lastAcceptable)
			}
			w := newWorld(t, worldObjects{flavors: []string{"f1", "f2", "f3"}, clusterQueues: []*kueue.ClusterQueue{cq.Obj()}})
			s, _ := w.scheduler()
			e := &entry{}
			e.Info = workload.Info{Obj: tc.self, ClusterQueue: "cq"}
			got := s.isMigrationAllowed(w.snapshot().ClusterQueue("cq"), e, w.log)
			if got != tc.want || e.inadmissibleMsg != tc.wantMessage {
				t.Errorf("allowed=%t message=%q, want %t %q", got, e.inadmissibleMsg, tc.want, tc.wantMessage)
			}
		})
	}
}
