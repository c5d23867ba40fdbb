package manager_test

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

func rawCohort(name string, preemption map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	u.SetKind("Cohort")
	u.SetName(name)
	if preemption != nil {
		gomega.Expect(unstructured.SetNestedField(u.Object, preemption, "spec", "preemption")).To(gomega.Succeed())
	}
	return u
}

func nestedString(g gomega.Gomega, ctx context.Context, kind, name string, fields ...string) any {
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	got.SetKind(kind)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(gomega.Succeed())
	v, _, _ := unstructured.NestedFieldNoCopy(got.Object, fields...)
	return v
}

var _ = ginkgo.Describe("Min-runtime fields", func() {
	ctx := context.Background()

	ginkgo.It("round-trip on ClusterQueues and Cohorts, 0s included", func() {
		cq, err := util.RawCPUClusterQueue("minruntime-roundtrip", "1", map[string]any{"preemptMinRuntime": "0s", "reclaimMinRuntime": "15m"})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cq))).To(gomega.Succeed()) })
		gomega.Expect(nestedString(gomega.Default, ctx, "ClusterQueue", cq.GetName(), "spec", "preemption", "preemptMinRuntime")).To(gomega.Equal("0s"))
		gomega.Expect(nestedString(gomega.Default, ctx, "ClusterQueue", cq.GetName(), "spec", "preemption", "reclaimMinRuntime")).To(gomega.Equal("15m"))

		co := rawCohort("minruntime-roundtrip", map[string]any{"preemptMinRuntime": "1h", "reclaimMinRuntime": "10m"})
		gomega.Expect(env.Client.Create(ctx, co)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, co))).To(gomega.Succeed()) })
		gomega.Expect(nestedString(gomega.Default, ctx, "Cohort", co.GetName(), "spec", "preemption", "reclaimMinRuntime")).To(gomega.Equal("10m"))
	})

	ginkgo.DescribeTable("bad values are rejected with the field path and the rule",
		func(kind string, preemption map[string]any, wantFragments ...string) {
			var obj *unstructured.Unstructured
			if kind == "Cohort" {
				obj = rawCohort("minruntime-invalid", preemption)
			} else {
				var err error
				obj, err = util.RawCPUClusterQueue("minruntime-invalid", "1", preemption)
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
			}
			err := env.Client.Create(ctx, obj)
			gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			for _, f := range wantFragments {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(f))
			}
		},
		ginkgo.Entry("negative preemptMinRuntime on a ClusterQueue", "ClusterQueue", map[string]any{"preemptMinRuntime": "-1m"},
			"spec.preemption.preemptMinRuntime", "must not be negative"),
		ginkgo.Entry("negative reclaimMinRuntime on a Cohort", "Cohort", map[string]any{"reclaimMinRuntime": "-10s"},
			"spec.preemption.reclaimMinRuntime", "must not be negative"),
		ginkgo.Entry("not a duration on a Cohort (schema)", "Cohort", map[string]any{"preemptMinRuntime": "an hour"},
			"spec.preemption.preemptMinRuntime"),
		ginkgo.Entry("not a duration on a ClusterQueue (schema)", "ClusterQueue", map[string]any{"reclaimMinRuntime": "1 day"},
			"spec.preemption.reclaimMinRuntime"),
	)
})
