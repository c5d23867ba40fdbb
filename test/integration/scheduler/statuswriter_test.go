package scheduler_test

import (
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// With timeshare.pendingStatusWriters, a waiting head's QuotaReserved message is written by the
// writers, not by the cycle; it must still reach the Workload, and a newer one replace it.
var _ = ginkgo.Describe("Pending statuses written off the cycle's path", ginkgo.Ordered, func() {
	var env *util.Env
	ginkgo.BeforeAll(func() {
		env = startEnv(schedulerKind{name: "kueue-timeshare"}, nil, "timeshare:\n  pendingStatusWriters: 4\n")
	})
	ginkgo.AfterAll(func() {
		if env != nil {
			gomega.Expect(env.Stop()).To(gomega.Succeed())
		}
	})

	ginkgo.It("writes a waiting Workload's message and replaces it when it changes", func() {
		r := newRun(env, "pending-writes")
		r.clusterQueue("pending-writes", "1")
		r.job("waiting", "pending-writes", "2")
		r.expect("waits", map[string]want{"waiting": pending.withMessage("maximum capacity (1)")})

		// More quota, still too little: the head is tried again and waits with a new message.
		gomega.Eventually(func(g gomega.Gomega) {
			var cq kueue.ClusterQueue
			g.Expect(env.Client.Get(r.ctx, client.ObjectKey{Name: "pending-writes"}, &cq)).To(gomega.Succeed())
			cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota = resource.MustParse("1500m")
			g.Expect(env.Client.Update(r.ctx, &cq)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())
		r.expect("waits for more", map[string]want{"waiting": pending.withMessage("maximum capacity (1500m)")})
	})
})
