// Package simulator_test is the simulator's honesty check: it runs small scenarios in the
// simulator and on a real API server with the kueue-timeshare manager, and asserts that both make
// the same admissions and preemptions, in the same order, for the same reasons.
package simulator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
)

var (
	env *util.Env
	// clk drives the manager's scheduler, preemptor and waker, as the simulator's clock drives its.
	clk *clocktesting.FakeClock
	// seen records what happens to Workloads, as the API server reports it.
	seen          = &observer{}
	stopInformers context.CancelFunc
)

func TestSimulatorHonesty(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Simulator honesty check")
}

var _ = ginkgo.BeforeSuite(func() {
	log := util.SuiteLogger(ginkgo.GinkgoWriter)
	// An hour ahead of the wall clock, which stamps creation times: every workload is then
	// created before any preemption, as in the scenarios, however slowly this machine starts.
	clk = clocktesting.NewFakeClock(time.Now().Add(time.Hour).Truncate(time.Second))
	var err error
	env, err = util.Start(util.Settings{Log: log, Clock: clk})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())

	informers, err := ctrlcache.New(env.ControlPlane.Config, ctrlcache.Options{Scheme: env.Scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var ctx context.Context
	ctx, stopInformers = context.WithCancel(context.Background())
	inf, err := informers.GetInformer(ctx, &kueue.Workload{})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen.change(nil, obj.(*kueue.Workload)) },
		UpdateFunc: func(old, obj any) { seen.change(old.(*kueue.Workload), obj.(*kueue.Workload)) },
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	go func() { _ = informers.Start(ctx) }()
	gomega.Expect(informers.WaitForCacheSync(ctx)).To(gomega.BeTrue())
})

var _ = ginkgo.AfterSuite(func() {
	// Watches left open keep the API server from stopping.
	if stopInformers != nil {
		stopInformers()
	}
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})

// observer turns Workload updates into the events the simulator reports: admitted (quota
// reserved), preempted or evicted (with the reason), finished. Workloads are named by their Job.
type observer struct {
	mu     sync.Mutex
	events []string
	// only, when set, limits the record to the workloads of one namespace.
	only string
}

func (o *observer) reset(namespace string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events, o.only = nil, namespace
}

func (o *observer) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

func (o *observer) change(old, wl *kueue.Workload) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if wl.Namespace != o.only || len(wl.OwnerReferences) == 0 {
		return
	}
	name := wl.OwnerReferences[0].Name
	if old == nil {
		old = &kueue.Workload{}
	}
	if workload.HasQuotaReservation(wl) && !workload.HasQuotaReservation(old) {
		o.events = append(o.events, name+" admitted")
	}
	if ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue &&
		!apimeta.IsStatusConditionTrue(old.Status.Conditions, kueue.WorkloadEvicted) {
		what := name + " evicted (" + ev.Reason + ")"
		if ev.Reason == kueue.WorkloadEvictedByPreemption || policy.IsOwnReason(ev.Reason) {
			if pc := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); pc != nil {
				what = name + " preempted (" + pc.Reason + ")"
			}
		}
		o.events = append(o.events, what)
	}
	if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) && !apimeta.IsStatusConditionTrue(old.Status.Conditions, kueue.WorkloadFinished) {
		o.events = append(o.events, name+" finished")
	}
}
