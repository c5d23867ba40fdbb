package timebased_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var (
	env *util.Env
	// clk drives our scheduler: windows expire when the test says so, not after real minutes.
	clk *clocktesting.FakeClock
)

func TestTimeBased(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Time-based same-priority preemption suite")
}

var _ = ginkgo.BeforeSuite(func() {
	log := util.SuiteLogger(ginkgo.GinkgoWriter)
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	stop := make(chan struct{})
	ginkgo.DeferCleanup(func() { close(stop) })
	util.FireDue(clk, 100*time.Millisecond, stop)
	var err error
	env, err = util.Start(util.Settings{Log: log, Clock: clk, Visibility: true})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
})

// The manager stamps conditions by clk and the API server creation times by the real clock: keep
// clk ahead, as it would be if both were real.
var _ = ginkgo.BeforeEach(func() { util.KeepAhead(clk) })

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})

// timeSharingQueue creates a namespace, a one-CPU ClusterQueue with minAdmitDuration window (and
// the queueing strategy, if given), and the LocalQueue lq pointing to it; it returns the namespace.
func timeSharingQueue(ctx context.Context, cq, lq, window, strategy string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: cq + "-"}}
	gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
	rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
	if err := env.Client.Create(ctx, rf); !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	obj, err := util.RawCPUClusterQueue(cq, "1", map[string]any{
		"withinClusterQueue":       "LowerOrNewerEqualPriority",
		"withinClusterQueueConfig": map[string]any{"minAdmitDuration": window},
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	if strategy != "" {
		gomega.Expect(unstructured.SetNestedField(obj.Object, strategy, "spec", "queueingStrategy")).To(gomega.Succeed())
	}
	gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
	gomega.Expect(env.Client.Create(ctx, &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: lq},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)},
	})).To(gomega.Succeed())
	ginkgo.DeferCleanup(retire, ctx, ns.Name, cq)
	return ns.Name
}

// retire deletes a spec's Jobs, Workloads and queues once it is done. Left behind, their turns
// went on at every step of the shared clock, and each later spec's manager had more to do: on a
// loaded machine the last specs ran out of time. No namespace controller or garbage collector
// runs on envtest, so each kind is deleted by hand.
func retire(ctx context.Context, ns, cq string) {
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	gomega.Expect(env.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), background)).To(gomega.Succeed())
	gomega.Expect(env.Client.DeleteAllOf(ctx, &kueue.Workload{}, client.InNamespace(ns))).To(gomega.Succeed())
	gomega.Expect(env.Client.DeleteAllOf(ctx, &kueue.LocalQueue{}, client.InNamespace(ns))).To(gomega.Succeed())
	gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cq}}))).To(gomega.Succeed())
}
