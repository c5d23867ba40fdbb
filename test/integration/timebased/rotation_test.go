package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
)

var _ = ginkgo.Describe("Fair rotation", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rotation-"}}
		gomega.Expect(env.Client.Create(ctx, n)).To(gomega.Succeed())
		ns = n.Name
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
		gomega.Expect(ignoreExists(env.Client.Create(ctx, rf))).To(gomega.Succeed())
		cq := clusterQueue("rotation", "5m")
		gomega.Expect(unstructured.SetNestedField(cq.Object, "BestEffortFIFO", "spec", "queueingStrategy")).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rot"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "rotation"},
		})).To(gomega.Succeed())
	})

	ginkgo.It("gives each of three same-priority workloads a turn, in a stable cycle (BestEffortFIFO)", func() {
		var jobs []*batchv1.Job
		for _, name := range []string{"alpha", "beta", "gamma"} {
			j := job(ns, name)
			j.Labels[constants.QueueLabel] = "rot"
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
			jobs = append(jobs, j)
		}
		running := func(g gomega.Gomega) string {
			var names []string
			for _, j := range jobs {
				if unsuspended(g, ctx, j) {
					names = append(names, j.Name)
				}
			}
			g.Expect(names).To(gomega.HaveLen(1), "exactly one job holds the quota")
			return names[0]
		}
		var turns []string
		gomega.Eventually(func(g gomega.Gomega) { turns = append(turns[:0], running(g)) }, timeout, interval).Should(gomega.Succeed())

		for range 5 {
			last := turns[len(turns)-1]
			clk.Step(5*time.Minute + time.Second)
			var next string
			gomega.Eventually(func(g gomega.Gomega) {
				next = running(g)
				g.Expect(next).NotTo(gomega.Equal(last), "the window ended, so another job takes a turn")
			}, timeout, interval).Should(gomega.Succeed(), "turns so far: %v", turns)
			turns = append(turns, next)
		}
		ginkgo.GinkgoWriter.Printf("turns: %v\n", turns)
		gomega.Expect(turns[:3]).To(gomega.ConsistOf("alpha", "beta", "gamma"), "every job gets a turn before any gets a second")
		gomega.Expect(turns[3:]).To(gomega.Equal(turns[:3]), "the rotation repeats in the same order")
	})
})

func ignoreExists(err error) error {
	if err != nil && apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
