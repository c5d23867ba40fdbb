package conversion_test

import (
	"context"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// An API server with the CRDs and nothing else: no manager, no webhook configurations (a cluster
// whose manager is not installed yet, or a validation cluster in CI). The rules in the schema
// alone reject what the webhook would, with its messages.
var _ = ginkgo.Describe("Rules in the CRD schema, with no manager", ginkgo.Ordered, func() {
	var (
		ctx       = context.Background()
		apiServer *envtest.Environment
		c         client.Client
	)
	ginkgo.BeforeAll(func() {
		root := env.ControlPlane.Root
		apiServer = &envtest.Environment{
			BinaryAssetsDirectory:    filepath.Join(root, controlplane.BinDir),
			CRDDirectoryPaths:        []string{filepath.Join(root, controlplane.CRDDir)},
			ErrorIfCRDPathMissing:    true,
			ControlPlaneStartTimeout: controlplane.StartTimeout,
			CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: controlplane.StartTimeout},
		}
		cfg, err := controlplane.StartEnv(apiServer)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		ginkgo.DeferCleanup(apiServer.Stop)
		c, err = client.New(cfg, client.Options{})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	})

	ginkgo.DescribeTable("a server-side dry run rejects, naming the field and the rule",
		func(kind, version string, fields map[string]any, wantFragments ...string) {
			obj := newObject(kind, version, "dry-run", fields)
			err := c.Create(ctx, obj, client.DryRunAll)
			gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			for _, f := range wantFragments {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(f))
			}
			gomega.Expect(err.Error()).NotTo(gomega.ContainSubstring("evaluating rule"), "one clear message per broken rule")
		},
		ginkgo.Entry("minAdmitDuration under a minute, v1beta2", "ClusterQueue", v1beta2,
			map[string]any{"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "59s"}},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("minAdmitDuration under a minute, v1beta1", "ClusterQueue", v1beta1,
			map[string]any{"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "500ms"}},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("withinClusterQueueConfig with LowerPriority", "ClusterQueue", v1beta2,
			map[string]any{"spec.preemption.withinClusterQueue": "LowerPriority", "spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1h"}},
			"spec.preemption.withinClusterQueueConfig", "requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority"),
		ginkgo.Entry("withinClusterQueueConfig with the default policy", "ClusterQueue", v1beta1,
			map[string]any{"spec.preemption": map[string]any{"withinClusterQueueConfig": map[string]any{}}},
			"spec.preemption.withinClusterQueueConfig", "requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not Never"),
		ginkgo.Entry("a negative preemptMinRuntime", "ClusterQueue", v1beta2,
			map[string]any{"spec.preemption.preemptMinRuntime": "-1m"},
			"spec.preemption.preemptMinRuntime", "must not be negative"),
		ginkgo.Entry("a Cohort's negative reclaimMinRuntime", "Cohort", v1beta1,
			map[string]any{"spec.preemption": map[string]any{"reclaimMinRuntime": "-10s"}},
			"spec.preemption.reclaimMinRuntime", "must not be negative"),
		ginkgo.Entry("not a duration", "Cohort", v1beta2,
			map[string]any{"spec.preemption": map[string]any{"preemptMinRuntime": "an hour"}},
			"spec.preemption.preemptMinRuntime", "should match"),
	)

	ginkgo.It("accepts valid values in a dry run", func() {
		for _, version := range []string{v1beta1, v1beta2} {
			for kind := range samples {
				gomega.Expect(c.Create(ctx, newObject(kind, version, "dry-run", samples[kind]), client.DryRunAll)).To(gomega.Succeed(), "%s %s", kind, version)
			}
		}
	})
})
