package chart_test

import (
	"fmt"
	"slices"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var _ = ginkgo.Describe("Settings for a production controller", func() {
	ginkgo.It("adds a PodDisruptionBudget that selects the manager Pods, only when enabled", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(ofKind(objs, "PodDisruptionBudget")).To(gomega.BeEmpty())

		objs, err = render("replicas=3", "podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=2")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		pdb := into[policyv1.PodDisruptionBudget](find(objs, "PodDisruptionBudget", fullname+"-controller-manager"))
		gomega.Expect(pdb.Namespace).To(gomega.Equal(namespace))
		gomega.Expect(*pdb.Spec.MinAvailable).To(gomega.Equal(intstr.FromInt32(2)))
		d, _ := managerContainer(objs)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(sel.Matches(labels.Set(d.Spec.Template.Labels))).To(gomega.BeTrue(), "the PDB selects the manager Pods")
		// Only the manager's Pods: the same selector as the Deployment's.
		gomega.Expect(pdb.Spec.Selector.MatchLabels).To(gomega.Equal(d.Spec.Selector.MatchLabels))

		objs, err = render("podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=50%")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		pdb = into[policyv1.PodDisruptionBudget](find(objs, "PodDisruptionBudget", fullname+"-controller-manager"))
		gomega.Expect(*pdb.Spec.MinAvailable).To(gomega.Equal(intstr.FromString("50%")))
	})

	ginkgo.It("spreads, rolls and probes the manager Pods as set", func() {
		objs, err := render(
			"topologySpreadConstraints[0].maxSkew=1",
			"topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
			"strategy.type=RollingUpdate",
			"strategy.rollingUpdate.maxSurge=0",
			"strategy.rollingUpdate.maxUnavailable=1",
			"hostNetwork=true",
			"dnsPolicy=ClusterFirstWithHostNet",
			"readinessProbe.periodSeconds=3",
			"readinessProbe.timeoutSeconds=2",
			"readinessProbe.failureThreshold=6",
			"livenessProbe.initialDelaySeconds=30",
			"livenessProbe.timeoutSeconds=5",
		)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		d, c := managerContainer(objs)
		pod := d.Spec.Template.Spec
		gomega.Expect(pod.TopologySpreadConstraints).To(gomega.Equal([]corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		}}))
		zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
		gomega.Expect(d.Spec.Strategy).To(gomega.Equal(appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one},
		}))
		gomega.Expect(pod.HostNetwork).To(gomega.BeTrue())
		gomega.Expect(pod.DNSPolicy).To(gomega.Equal(corev1.DNSClusterFirstWithHostNet))
		timings := func(p *corev1.Probe) [5]int32 {
			return [5]int32{p.InitialDelaySeconds, p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold, p.SuccessThreshold}
		}
		gomega.Expect(timings(c.ReadinessProbe)).To(gomega.Equal([5]int32{5, 3, 2, 6, 1}))
		gomega.Expect(timings(c.LivenessProbe)).To(gomega.Equal([5]int32{30, 20, 5, 3, 1}))

		// Defaults: Kubernetes' own strategy, no spread, pod network.
		objs, err = render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		d, c = managerContainer(objs)
		gomega.Expect(d.Spec.Strategy).To(gomega.Equal(appsv1.DeploymentStrategy{}))
		gomega.Expect(d.Spec.Template.Spec.TopologySpreadConstraints).To(gomega.BeEmpty())
		gomega.Expect(d.Spec.Template.Spec.HostNetwork).To(gomega.BeFalse())
		gomega.Expect(timings(c.ReadinessProbe)).To(gomega.Equal([5]int32{5, 10, 1, 3, 1}))
		gomega.Expect(timings(c.LivenessProbe)).To(gomega.Equal([5]int32{15, 20, 1, 3, 1}))
	})

	ginkgo.It("sets the Services' type, annotations, port and IP families", func() {
		objs, err := render(
			"webhook.service.type=NodePort",
			"webhook.service.annotations.team=platform",
			"webhook.service.ipFamilyPolicy=PreferDualStack",
			"webhook.service.ipFamilies={IPv6,IPv4}",
			"metrics.service.type=LoadBalancer",
			"metrics.service.port=9090",
			"metrics.service.annotations.prometheus\\.io/port=metrics",
			"metrics.service.labels.scrape=yes",
			"metrics.serviceMonitor.enabled=true",
		)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		webhook := into[corev1.Service](find(objs, "Service", fullname+"-webhook-service"))
		gomega.Expect(webhook.Spec.Type).To(gomega.Equal(corev1.ServiceTypeNodePort))
		gomega.Expect(webhook.Annotations).To(gomega.HaveKeyWithValue("team", "platform"))
		gomega.Expect(*webhook.Spec.IPFamilyPolicy).To(gomega.Equal(corev1.IPFamilyPolicyPreferDualStack))
		gomega.Expect(webhook.Spec.IPFamilies).To(gomega.Equal([]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}))
		// The webhook configurations and conversion call 443 whatever the Service's type.
		gomega.Expect(webhook.Spec.Ports).To(gomega.HaveLen(1))
		gomega.Expect(webhook.Spec.Ports[0].Port).To(gomega.Equal(int32(443)))

		metrics := into[corev1.Service](find(objs, "Service", fullname+"-metrics-service"))
		gomega.Expect(metrics.Spec.Type).To(gomega.Equal(corev1.ServiceTypeLoadBalancer))
		gomega.Expect(metrics.Annotations).To(gomega.HaveKeyWithValue("prometheus.io/port", "metrics"))
		gomega.Expect(metrics.Labels).To(gomega.HaveKeyWithValue("scrape", "yes"))
		gomega.Expect(metrics.Spec.Ports).To(gomega.Equal([]corev1.ServicePort{{
			Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("metrics"),
		}}))
		// The ServiceMonitor still selects it and scrapes the port by name.
		sm := find(objs, "ServiceMonitor", fullname+"-metrics")
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		gomega.Expect(labels.SelectorFromSet(selector).Matches(labels.Set(metrics.Labels))).To(gomega.BeTrue())
	})

	ginkgo.It("uses kubernetesClusterDomain in the Services' DNS names", func() {
		objs, err := render("certManager.enabled=true", "kubernetesClusterDomain=corp.example")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		certs := ofKind(objs, "Certificate")
		gomega.Expect(certs).To(gomega.HaveLen(3))
		for _, cert := range certs {
			names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			gomega.Expect(names).To(gomega.HaveLen(2))
			gomega.Expect(names[1]).To(gomega.Equal(names[0]+".corp.example"), cert.GetName())
			gomega.Expect(names[0]).To(gomega.HaveSuffix("." + namespace + ".svc"))
		}
		_, err = helmCmd("", "template", release, chartDir, "--set", "kubernetesClusterDomain=Not_A_Domain")
		gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("/kubernetesClusterDomain")))
	})

	ginkgo.It("sets the mutating webhooks' reinvocation policy", func() {
		objs, err := render("webhook.reinvocationPolicy=IfNeeded")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		hooks, _, _ := unstructured.NestedSlice(find(objs, "MutatingWebhookConfiguration", fullname+"-mutating-webhook-configuration").Object, "webhooks")
		gomega.Expect(hooks).NotTo(gomega.BeEmpty())
		for _, h := range hooks {
			gomega.Expect(h).To(gomega.HaveKeyWithValue("reinvocationPolicy", "IfNeeded"))
		}
	})

	ginkgo.It("leaves the kube-system RoleBinding out when told", func() {
		objs, err := render("visibility.authReaderRoleBinding=false")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, o := range ofKind(objs, "RoleBinding") {
			gomega.Expect(o.GetNamespace()).NotTo(gomega.Equal("kube-system"), o.GetName())
		}
		gomega.Expect(ofKind(objs, "APIService")).To(gomega.HaveLen(2))
	})

	ginkgo.DescribeTable("schema rejects production values of the wrong shape, naming them",
		func(set, wantInError string) {
			_, err := helmCmd("", "template", release, chartDir, "--set", set)
			gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(wantInError)))
		},
		ginkgo.Entry("a probe period of zero", "readinessProbe.periodSeconds=0", "/readinessProbe/periodSeconds"),
		ginkgo.Entry("an unknown probe setting", "livenessProbe.path=/x", "path"),
		ginkgo.Entry("a Service type Kubernetes does not have", "metrics.service.type=Internal", "/metrics/service/type"),
		ginkgo.Entry("an update strategy Kubernetes does not have", "strategy.type=BlueGreen", "/strategy/type"),
		ginkgo.Entry("a PDB that is not a number or a percentage", "podDisruptionBudget.minAvailable=most", "/podDisruptionBudget/minAvailable"),
		ginkgo.Entry("a spread constraint without its required fields", "topologySpreadConstraints[0].maxSkew=1", "/topologySpreadConstraints/0"),
		ginkgo.Entry("a reinvocation policy Kubernetes does not have", "webhook.reinvocationPolicy=Always", "/webhook/reinvocationPolicy"),
	)
})

var _ = ginkgo.Describe("ClusterRoles for people", func() {
	// granted is what an aggregated ClusterRole ends up with: the rules of every rendered
	// ClusterRole its selectors match, as Kubernetes' aggregation controller fills it in.
	granted := func(objs []*unstructured.Unstructured, name string) map[string][]string {
		ginkgo.GinkgoHelper()
		agg := into[rbacv1.ClusterRole](find(objs, "ClusterRole", name))
		gomega.Expect(agg.AggregationRule).NotTo(gomega.BeNil())
		out := map[string][]string{}
		for _, o := range ofKind(objs, "ClusterRole") {
			role := into[rbacv1.ClusterRole](o)
			for _, s := range agg.AggregationRule.ClusterRoleSelectors {
				sel, err := metav1.LabelSelectorAsSelector(&s)
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
				if !sel.Matches(labels.Set(role.Labels)) {
					continue
				}
				for _, r := range role.Rules {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							key := g + "/" + res
							for _, v := range r.Verbs {
								if !slices.Contains(out[key], v) {
									out[key] = append(out[key], v)
								}
							}
							slices.Sort(out[key])
						}
					}
				}
			}
		}
		return out
	}
	all := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	read := []string{"get", "list", "watch"}

	ginkgo.It("lets batch admins manage queues and jobs, and batch users run jobs and read their queues", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		admin := granted(objs, fullname+"-batch-admin-role")
		user := granted(objs, fullname+"-batch-user-role")
		for key, verbs := range map[string][]string{
			"kueue.x-k8s.io/clusterqueues":                             all,
			"kueue.x-k8s.io/cohorts":                                   all,
			"kueue.x-k8s.io/resourceflavors":                           all,
			"kueue.x-k8s.io/topologies":                                all,
			"kueue.x-k8s.io/localqueues":                               all,
			"kueue.x-k8s.io/workloads":                                 all,
			"batch/jobs":                                               all,
			"ray.io/rayclusters":                                       all,
			"visibility.kueue.x-k8s.io/clusterqueues/pendingworkloads": read,
			"visibility.kueue.x-k8s.io/localqueues/pendingworkloads":   read,
		} {
			gomega.Expect(admin).To(gomega.HaveKeyWithValue(key, verbs), "batch admin, %s", key)
		}
		for key, verbs := range map[string][]string{
			"batch/jobs":                     all,
			"jobset.x-k8s.io/jobsets":        all,
			"kubeflow.org/pytorchjobs":       all,
			"trainer.kubeflow.org/trainjobs": all,
			"ray.io/rayjobs":                 all,
			"ray.io/rayclusters":             all,
			"kueue.x-k8s.io/localqueues":     read,
			"kueue.x-k8s.io/workloads":       read,
			"visibility.kueue.x-k8s.io/localqueues/pendingworkloads": read,
		} {
			gomega.Expect(user).To(gomega.HaveKeyWithValue(key, verbs), "batch user, %s", key)
		}
		// Users never touch the cluster's queues or quotas, nor see other teams' pending lists.
		for _, key := range []string{"kueue.x-k8s.io/clusterqueues", "kueue.x-k8s.io/cohorts", "kueue.x-k8s.io/resourceflavors",
			"visibility.kueue.x-k8s.io/clusterqueues/pendingworkloads"} {
			gomega.Expect(user).NotTo(gomega.HaveKey(key))
		}
	})

	ginkgo.It("joins the viewer roles to Kubernetes' admin, edit and view roles, cluster-scoped kinds to admin only", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		joins := map[string][]string{}
		for _, o := range ofKind(objs, "ClusterRole") {
			for _, builtin := range []string{"admin", "edit", "view"} {
				if o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-"+builtin] == "true" {
					joins[o.GetName()] = append(joins[o.GetName()], builtin)
				}
			}
		}
		for role, want := range map[string][]string{
			"job-viewer-role":                  {"admin", "edit", "view"},
			"localqueue-viewer-role":           {"admin", "edit", "view"},
			"workload-viewer-role":             {"admin", "edit", "view"},
			"pending-workloads-lq-viewer-role": {"admin", "edit", "view"},
			"pending-workloads-cq-viewer-role": {"admin", "edit", "view"},
			"clusterqueue-viewer-role":         {"admin"},
			"cohort-viewer-role":               {"admin"},
		} {
			gomega.Expect(cmp.Diff(want, joins[fullname+"-"+role])).To(gomega.BeEmpty(), role)
		}
		// Editors never join Kubernetes' roles: a namespace admin does not become a queue admin.
		for name := range joins {
			gomega.Expect(name).NotTo(gomega.ContainSubstring("-editor-"), name)
		}
	})

	ginkgo.It("are left out when userRoles.enabled is false", func() {
		with, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		without, err := render("userRoles.enabled=false")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(len(ofKind(with, "ClusterRole"))-len(ofKind(without, "ClusterRole"))).To(gomega.Equal(44),
			fmt.Sprintf("2 aggregated roles, 20 kinds with an editor and a viewer, 2 pending-workloads viewers"))
		for _, o := range ofKind(without, "ClusterRole") {
			gomega.Expect(o.Object).NotTo(gomega.HaveKey("aggregationRule"), o.GetName())
		}
	})
})
