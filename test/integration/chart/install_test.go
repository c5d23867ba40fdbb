package chart_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var _ = ginkgo.Describe("helm install on a local control plane", ginkgo.Ordered, func() {
	var (
		ctx context.Context
		k   *cluster
		m   *runningManager
	)
	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		// Ports of this machine: the manager runs here, next to other test processes.
		k.helm("install", release, chartDir, "--namespace", namespace, "--create-namespace",
			"--set", fmt.Sprintf("webhook.port=%d", freePort()),
			"--set", fmt.Sprintf("health.port=%d", freePort()),
			"--set", fmt.Sprintf("metrics.port=%d", freePort()),
			"--set", fmt.Sprintf("visibility.port=%d", freePort()))
	})

	ginkgo.It("installs Kueue's CRDs with kueue-timeshare's fields", func() {
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		gomega.Expect(crds.Items).To(gomega.HaveLen(11))
		var cq apiextensionsv1.CustomResourceDefinition
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: "clusterqueues.kueue.x-k8s.io"}, &cq)).To(gomega.Succeed())
		for _, v := range cq.Spec.Versions {
			if v.Name == "v1beta2" {
				preemption := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["preemption"]
				gomega.Expect(preemption.Properties).To(gomega.HaveKey("withinClusterQueueConfig"))
			}
		}
	})

	ginkgo.It("installs the Workload admission policy, the cluster serving v1 policies", func() {
		var policy admissionregistrationv1.ValidatingAdmissionPolicy
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: workloadPolicy}, &policy)).To(gomega.Succeed())
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: workloadPolicy}, &binding)).To(gomega.Succeed())
		gomega.Expect(binding.Spec.PolicyName).To(gomega.Equal(workloadPolicy))
	})

	ginkgo.It("runs the manager as the chart's ServiceAccount, with certificates it manages itself, and admits a Job", func() {
		logs.reset()
		m = k.startManager(ctx, namespace, fullname)

		ginkgo.By("injecting the manager's CA into the chart's webhook configurations and conversion CRDs")
		k.expectCAInjected(ctx, fullname)
		ginkgo.By("serving every webhook path and /convert the chart points at")
		k.expectPathsServed(ctx, m, fullname)

		ginkgo.By("admitting a Job through the chart's webhook Service")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
		gomega.Expect(k.client.Create(ctx, ns)).To(gomega.Succeed())
		gomega.Expect(k.client.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})).To(gomega.Succeed())
		gomega.Expect(k.client.Create(ctx, util.CPUClusterQueue("team-a", "2"))).To(gomega.Succeed())
		gomega.Expect(k.client.Create(ctx, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "team-a"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "team-a"},
		})).To(gomega.Succeed())
		job := util.CPUJob(ns.Name, "first", "team-a", "1")
		gomega.Expect(k.client.Create(ctx, job)).To(gomega.Succeed())
		gomega.Expect(ptr.Deref(job.Spec.Suspend, false)).To(gomega.BeTrue(), "suspended on creation by the mutating webhook")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(util.Unsuspended(g, ctx, k.client, job)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("serving the visibility API through the chart's APIServices")
		waiting := util.CPUJob(ns.Name, "waiting", "team-a", "2")
		gomega.Expect(k.client.Create(ctx, waiting)).To(gomega.Succeed())
		api, err := visibilityclient.NewForConfig(k.cfg)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(func(g gomega.Gomega) {
			inCQ, err := api.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, "team-a", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(inCQ.Items).To(gomega.HaveLen(1))
			g.Expect(inCQ.Items[0].OwnerReferences).To(gomega.ContainElement(gomega.HaveField("Name", "waiting")))
			inLQ, err := api.VisibilityV1beta1().LocalQueues(ns.Name).GetPendingWorkloadsSummary(ctx, "team-a", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(inLQ.Items).To(gomega.HaveLen(1))
			g.Expect(inLQ.Items[0].Name).To(gomega.Equal(inCQ.Items[0].Name))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("rejecting an invalid kueue-timeshare field through our webhook entry")
		bad, err := util.RawCPUClusterQueue("too-short", "1", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "30s"},
		})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		err = k.client.Create(ctx, bad)
		gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("spec.preemption.withinClusterQueueConfig.minAdmitDuration")))

		ginkgo.By("converting each converting kind through the chart's conversion webhook")
		// MultiKueueCluster has no webhook of its own in the manager: /convert handles every
		// convertible type of the scheme.
		gomega.Expect(k.client.Create(ctx, &kueue.MultiKueueCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "worker"},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{
				KubeConfig: &kueue.KubeConfig{Location: "worker-kubeconfig", LocationType: kueue.SecretLocationType},
			}},
		})).To(gomega.Succeed())
		gomega.Expect(k.client.Create(ctx, &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}})).To(gomega.Succeed())
		var workloads kueue.WorkloadList
		gomega.Expect(k.client.List(ctx, &workloads, client.InNamespace(ns.Name))).To(gomega.Succeed())
		gomega.Expect(workloads.Items).To(gomega.HaveLen(2))
		for kind, key := range map[string]client.ObjectKey{
			"ClusterQueue":      {Name: "team-a"},
			"Cohort":            {Name: "org"},
			"LocalQueue":        {Namespace: ns.Name, Name: "team-a"},
			"MultiKueueCluster": {Name: "worker"},
			"Workload":          client.ObjectKeyFromObject(&workloads.Items[0]),
		} {
			old := &unstructured.Unstructured{}
			old.SetAPIVersion("kueue.x-k8s.io/v1beta1")
			old.SetKind(kind)
			gomega.Expect(k.client.Get(ctx, key, old)).To(gomega.Succeed(), kind)
			gomega.Expect(old.GetAPIVersion()).To(gomega.Equal("kueue.x-k8s.io/v1beta1"), kind)
			gomega.Expect(old.Object).To(gomega.HaveKey("spec"), kind)
		}

		ginkgo.By("needing no permission the chart does not grant")
		gomega.Expect(logs.lines("forbidden")).To(gomega.BeEmpty())

		ginkgo.By("logging no token, password or key, although it writes the webhook certificate's key into a Secret")
		for _, word := range []string{"BEGIN", "PRIVATE KEY", "password", "Password", "Bearer", "token", "Token"} {
			gomega.Expect(logs.lines(word)).To(gomega.BeEmpty(), "a log line holds %q", word)
		}
		var certs corev1.Secret
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fullname + "-webhook-server-cert"}, &certs)).To(gomega.Succeed())
		gomega.Expect(certs.Data["tls.key"]).NotTo(gomega.BeEmpty())
		for _, line := range strings.Split(string(certs.Data["tls.key"]), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
				gomega.Expect(logs.lines(line)).To(gomega.BeEmpty(), "a log line holds part of the webhook certificate's key")
			}
		}
	})

	ginkgo.It("keeps the CRDs and every Kueue object on uninstall", func() {
		m.stop() // done already when the spec that started it ended
		k.helm("uninstall", release, "--namespace", namespace)
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		gomega.Expect(crds.Items).To(gomega.HaveLen(11))
		var cq kueue.ClusterQueue
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: "team-a"}, &cq)).To(gomega.Succeed())
		var jobs batchv1.JobList
		gomega.Expect(k.client.List(ctx, &jobs, client.InNamespace("team-a"))).To(gomega.Succeed())
		gomega.Expect(jobs.Items).To(gomega.HaveLen(2))
		var workloads kueue.WorkloadList
		gomega.Expect(k.client.List(ctx, &workloads, client.InNamespace("team-a"))).To(gomega.Succeed())
		gomega.Expect(workloads.Items).To(gomega.HaveLen(2))
	})
})
