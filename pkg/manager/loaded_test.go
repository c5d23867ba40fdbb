package manager

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
)

// A restarted manager's first cycle waits until its cache counts what already holds quota.
func TestQuotaLoaded(t *testing.T) {
	now := time.Now()
	admitted := func(name string) *kueue.Workload {
		psa := testingwrappers.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, "1")
		return testingwrappers.MakeWorkload(name, "ns").Queue("lq").Request(corev1.ResourceCPU, "1").
			ReserveQuotaAt(testingwrappers.MakeAdmission("cq").PodSets(psa.Obj()).Obj(), now).Obj()
	}
	finished := admitted("finished")
	finished.Status.Conditions = append(finished.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(now)})
	pending := testingwrappers.MakeWorkload("pending", "ns").Queue("lq").Request(corev1.ResourceCPU, "1").Obj()
	cases := map[string]struct {
		listed  []*kueue.Workload
		inCache []*kueue.Workload
		want    bool
	}{
		"nothing holds quota":                      {listed: []*kueue.Workload{pending}, want: true},
		"a workload holding quota, not yet cached": {listed: []*kueue.Workload{admitted("a"), pending}, want: false},
		"every workload holding quota cached":      {listed: []*kueue.Workload{admitted("a"), admitted("b")}, inCache: []*kueue.Workload{admitted("a"), admitted("b")}, want: true},
		"one of two cached":                        {listed: []*kueue.Workload{admitted("a"), admitted("b")}, inCache: []*kueue.Workload{admitted("a")}, want: false},
		"a finished workload holds nothing":        {listed: []*kueue.Workload{finished}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var objs []client.Object
			for _, wl := range tc.listed {
				objs = append(objs, wl)
			}
			c := utiltesting.NewClientBuilder().WithObjects(objs...).Build()
			// The ClusterQueue is added to the cache before any workload, as on an empty start:
			// adding it reads the workloads its client lists.
			cache := schdcache.New(utiltesting.NewClientBuilder().Build())
			cache.AddOrUpdateResourceFlavor(logr.Discard(), testingwrappers.MakeResourceFlavor("f0").Obj())
			if err := cache.AddClusterQueue(ctx, testingwrappers.MakeClusterQueue("cq").
				ResourceGroup(*testingwrappers.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "4").Obj()).Obj()); err != nil {
				t.Fatal(err)
			}
			for _, wl := range tc.inCache {
				cache.AddOrUpdateWorkload(logr.Discard(), wl)
			}
			got, err := quotaLoaded(ctx, c, cache)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("quotaLoaded = %v, want %v", got, tc.want)
			}
			if waited := waitForQuotaLoaded(ctx, c, cache, 300*time.Millisecond); waited != tc.want {
				t.Errorf("waitForQuotaLoaded = %v, want %v", waited, tc.want)
			}
		})
	}
}
