package preemption

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// One 2-CPU ClusterQueue (withinClusterQueue: LowerPriority) running "long" (2 CPUs, priority 10,
// admitted 2 hours ago, with annotations ann) and a pending priority-10 workload asking for cpus.
func expectedRuntimeScenario(cpus string, ann map[string]string) *snapgen.Scenario {
	sc := &snapgen.Scenario{Now: snapgen.Epoch.Add(3 * time.Hour)}
	sc.Flavors = []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f0").Obj()}
	sc.ClusterQueues = []*kueue.ClusterQueue{utiltestingapi.MakeClusterQueue("cq").
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "2").Obj()).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}).Obj()}
	started := sc.Now.Add(-2 * time.Hour)
	psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, "2")
	long := utiltestingapi.MakeWorkload("long", "ns").UID("uid-long").Priority(10).Request(corev1.ResourceCPU, "2").Creation(snapgen.Epoch).
		ReserveQuotaAt(utiltestingapi.MakeAdmission("cq").PodSets(psa.Obj()).Obj(), started).AdmittedAt(true, started).Obj()
	long.Annotations = ann
	sc.Admitted = []*kueue.Workload{long}
	sc.Pending = utiltestingapi.MakeWorkload("pending", "ns").UID("uid-pending").Priority(10).
		Request(corev1.ResourceCPU, cpus).Creation(snapgen.Epoch.Add(time.Hour)).Obj()
	sc.PendingCQ = "cq"
	return sc
}

func TestExpectedRuntimeTargets(t *testing.T) {
	cases := map[string]struct {
		cpus   string
		ann    map[string]string
		opt    bool
		policy kueue.PreemptionPolicy
		want   []string
	}{
		"past its expected runtime: preempted for a same-priority workload": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "1h"}, opt: true,
			want: []string{"long: InClusterQueueExpectedRuntime"},
		},
		"soft: not evicted when that would not let the workload in": {
			cpus: "3", ann: map[string]string{annotations.ExpectedRuntime: "1h"}, opt: true,
		},
		"not yet at its expected runtime": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "3h"}, opt: true,
		},
		"in its cooldown": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "1h", annotations.RequeueNotBefore: "2026-03-01T12:00:01Z"}, opt: true,
		},
		"cooldown over": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "1h", annotations.RequeueNotBefore: "2026-03-01T12:00:00Z"}, opt: true,
			want: []string{"long: InClusterQueueExpectedRuntime"},
		},
		"invalid annotation: skipped": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "an hour"}, opt: true,
		},
		"not configured: upstream": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "1h"},
		},
		"withinClusterQueue Never stays Never": {
			cpus: "2", ann: map[string]string{annotations.ExpectedRuntime: "1h"}, opt: true, policy: kueue.PreemptionPolicyNever,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			sc := expectedRuntimeScenario(tc.cpus, tc.ann)
			if tc.policy != "" {
				sc.ClusterQueues[0].Spec.Preemption.WithinClusterQueue = tc.policy
			}
			var opts []Option
			if tc.opt {
				opts = append(opts, WithSources(expectedruntime.DefaultCooldown(10*time.Minute)))
			}
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, opts...)
			info := sc.PendingInfo()
			a := cpuPreemptAssignment(info)
			var got []string
			for _, tg := range p.GetTargets(ctx, *info, a, snapshotOf(t, ctx, sc)) {
				got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}
