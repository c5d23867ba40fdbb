package manager_test

import (
	"context"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// clusterQueueWithConfig builds a ClusterQueue as raw JSON: Kueue's typed client would drop the field.
func clusterQueueWithConfig(name, within string, config map[string]any) *unstructured.Unstructured {
	preemption := map[string]any{"withinClusterQueue": within}
	if config != nil {
		preemption["withinClusterQueueConfig"] = config
	}
	u, err := util.RawCPUClusterQueue(name, "4", preemption)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return u
}

// updateClusterQueue sets one field on the latest version, retrying when controllers got there first.
func updateClusterQueue(ctx context.Context, name string, value any, fields ...string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		u.SetKind("ClusterQueue")
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
			return err
		}
		return env.Client.Update(ctx, u)
	})
}

func minAdmitDurationOf(g gomega.Gomega, ctx context.Context, name string) any {
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	got.SetKind("ClusterQueue")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(gomega.Succeed())
	v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration")
	return v
}

var _ = ginkgo.Describe("ClusterQueue withinClusterQueueConfig", func() {
	ctx := context.Background()

	ginkgo.It("round-trips through the API server with every webhook on, on create and update", func() {
		cq := clusterQueueWithConfig("timeshare-roundtrip", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "4h"})
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cq))).To(gomega.Succeed()) })
		gomega.Expect(minAdmitDurationOf(gomega.Default, ctx, cq.GetName())).To(gomega.Equal("4h"))

		gomega.Expect(updateClusterQueue(ctx, cq.GetName(), "90m", "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration")).To(gomega.Succeed())
		gomega.Expect(minAdmitDurationOf(gomega.Default, ctx, cq.GetName())).To(gomega.Equal("90m"))
	})

	ginkgo.DescribeTable("rejects bad values with the field path and the rule",
		func(within string, config map[string]any, wantFragments ...string) {
			cq := clusterQueueWithConfig("timeshare-invalid", within, config)
			err := env.Client.Create(ctx, cq)
			gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			for _, f := range wantFragments {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(f))
			}
			gomega.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: cq.GetName()}, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"}}))).To(gomega.BeTrue())
		},
		ginkgo.Entry("shorter than a minute", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "30s"},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("zero", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "0s"},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("negative", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "-1h"},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("with LowerPriority", "LowerPriority", map[string]any{"minAdmitDuration": "1h"},
			"spec.preemption.withinClusterQueueConfig", "not LowerPriority"),
		ginkgo.Entry("with Never", "Never", map[string]any{},
			"spec.preemption.withinClusterQueueConfig", "not Never"),
		ginkgo.Entry("not a duration (schema)", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "four hours"},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration"),
	)

	ginkgo.It("rejects an update that breaks the rules and keeps the stored object", func() {
		cq := clusterQueueWithConfig("timeshare-update", "LowerOrNewerEqualPriority", map[string]any{"minAdmitDuration": "1h"})
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cq))).To(gomega.Succeed()) })
		err := updateClusterQueue(ctx, cq.GetName(), "LowerPriority", "spec", "preemption", "withinClusterQueue")
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
		gomega.Expect(minAdmitDurationOf(gomega.Default, ctx, cq.GetName())).To(gomega.Equal("1h"))
	})

	ginkgo.It("accepts a config without minAdmitDuration", func() {
		cq := clusterQueueWithConfig("timeshare-empty", "LowerOrNewerEqualPriority", map[string]any{})
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cq))).To(gomega.Succeed()) })
	})
})
