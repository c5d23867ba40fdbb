package chart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	componentconfig "k8s.io/component-base/config/v1alpha1"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

// upstreamChartDir is upstream Kueue v0.19.2's Helm chart in the module this project builds
// against (read at test time, never copied).
func upstreamChartDir() string {
	ginkgo.GinkgoHelper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	dir := filepath.Join(strings.TrimSpace(string(out)), "charts", "kueue")
	_, err = os.Stat(filepath.Join(dir, "values.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return dir
}

// typicalOverrides are what an admin commonly sets in upstream's chart: gates, a configuration
// file with waitForPodsReady, fair sharing and fewer integrations, Prometheus, a PDB with two
// replicas spread over zones, probe timings, resources and a dual-stack webhook Service.
const typicalOverrides = `
enablePrometheus: true
kubernetesClusterDomain: corp.example
controllerManager:
  replicas: 2
  featureGates:
    - name: TopologyAwareScheduling
      enabled: true
    - name: VisibilityOnDemand
      enabled: false
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 0
      maxUnavailable: 1
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          app.kubernetes.io/component: controller
  podDisruptionBudget:
    enabled: true
    minAvailable: 1
  readinessProbe:
    periodSeconds: 7
    failureThreshold: 5
  livenessProbe:
    timeoutSeconds: 4
  manager:
    logLevel: 4
    priorityClassName: system-cluster-critical
    resources:
      requests:
        cpu: "1"
        memory: 1Gi
      limits:
        memory: 2Gi
  nodeSelector:
    node-role.kubernetes.io/control-plane: ""
  tolerations:
    - key: node-role.kubernetes.io/control-plane
      operator: Exists
      effect: NoSchedule
webhookService:
  ipDualStack:
    enabled: true
    ipFamilies: ["IPv6", "IPv4"]
    ipFamilyPolicy: PreferDualStack
metricsService:
  annotations:
    prometheus.io/scrape: "true"
mutatingWebhook:
  reinvocationPolicy: IfNeeded
managerConfig:
  controllerManagerConfigYaml: |-
    apiVersion: config.kueue.x-k8s.io/v1beta2
    kind: Configuration
    health:
      healthProbeBindAddress: :8081
    metrics:
      bindAddress: :8443
      enableClusterQueueResources: true
    webhook:
      port: 9443
    leaderElection:
      leaderElect: true
      resourceName: c1f6bfd2.kueue.x-k8s.io
    controller:
      groupKindConcurrency:
        Job.batch: 5
        Workload.kueue.x-k8s.io: 10
    clientConnection:
      qps: 100
      burst: 200
    waitForPodsReady:
      timeout: 7m
      blockAdmission: true
      requeuingStrategy:
        timestamp: Eviction
        backoffBaseSeconds: 30
    manageJobsWithoutQueueName: true
    fairSharing:
      preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
    integrations:
      frameworks:
      - batch/job
      - jobset.x-k8s.io/jobset
      - kubeflow.org/pytorchjob
    objectRetentionPolicies:
      workloads:
        afterFinished: 1h
`

// renderWith renders a chart for release "kueue" with values files (upstream's install uses
// the release name kueue; ours then derives kueue-kueue-timeshare).
func renderWith(chart string, files ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", "kueue", chart, "--namespace", namespace}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	out, err := helmCmd("", args...)
	if err != nil {
		return nil, err
	}
	return decodeAll([]byte(out))
}

// loadManagerConfig loads a rendered chart's configuration file and feature gates as the
// manager binary would: the ConfigMap's single file and the Deployment's --feature-gates.
func loadManagerConfig(objs []*unstructured.Unstructured) (manager.Config, map[string]string, *appsv1.Deployment) {
	ginkgo.GinkgoHelper()
	deployments := ofKind(objs, "Deployment")
	gomega.Expect(deployments).To(gomega.HaveLen(1))
	d := into[appsv1.Deployment](deployments[0])
	maps := ofKind(objs, "ConfigMap")
	gomega.Expect(maps).To(gomega.HaveLen(1))
	cm := into[corev1.ConfigMap](maps[0])
	gomega.Expect(cm.Data).To(gomega.HaveLen(1))
	var file string
	for _, v := range cm.Data {
		file = v
	}
	path := filepath.Join(ginkgo.GinkgoT().TempDir(), "config.yaml")
	gomega.Expect(os.WriteFile(path, []byte(file), 0o600)).To(gomega.Succeed())
	gates, _ := flagValue(d.Spec.Template.Spec.Containers[0].Args, "feature-gates")
	gateMap := map[string]string{}
	for _, kv := range strings.Split(gates, ",") {
		if name, value, ok := strings.Cut(kv, "="); ok {
			gateMap[name] = value
		}
	}
	restoreGates(gates)
	_, cfg, err := manager.LoadConfig(scheme, path, gates)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return cfg, gateMap, d
}

var _ = ginkgo.Describe("An upstream Kueue v0.19.2 values file", func() {
	var upstreamDir, upstreamValues, overrides string
	ginkgo.BeforeEach(func() {
		upstreamDir = upstreamChartDir()
		upstreamValues = filepath.Join(upstreamDir, "values.yaml")
		overrides = filepath.Join(ginkgo.GinkgoT().TempDir(), "overrides.yaml")
		gomega.Expect(os.WriteFile(overrides, []byte(typicalOverrides), 0o600)).To(gomega.Succeed())
	})

	ginkgo.It("installs with upstream's own defaults, with the configuration upstream's chart gives its manager", func() {
		ours, err := renderWith(chartDir, upstreamValues)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		theirs, err := renderWith(upstreamDir, upstreamValues)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		expectSameManager(ours, theirs)
	})

	ginkgo.It("maps typical overrides: gates, configuration file, replicas, PDB, spread, probes, Services, Prometheus", func() {
		ours, err := renderWith(chartDir, upstreamValues, overrides)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		theirs, err := renderWith(upstreamDir, upstreamValues, overrides)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		cfg, gates := expectSameManager(ours, theirs)

		// The overrides reached the manager, not only agree with upstream's.
		k := cfg.Kueue
		gomega.Expect(gates).To(gomega.Equal(map[string]string{"TopologyAwareScheduling": "true", "VisibilityOnDemand": "false"}))
		gomega.Expect(k.WaitForPodsReady.Timeout.Duration.String()).To(gomega.Equal("7m0s"))
		gomega.Expect(k.WaitForPodsReady.BlockAdmission).To(gomega.HaveValue(gomega.BeTrue()))
		gomega.Expect(k.FairSharing.PreemptionStrategies).To(gomega.Equal([]configapi.PreemptionStrategy{"LessThanOrEqualToFinalShare", "LessThanInitialShare"}))
		gomega.Expect(k.ManageJobsWithoutQueueName).To(gomega.BeTrue())
		gomega.Expect(k.Metrics.EnableClusterQueueResources).To(gomega.BeTrue())
		gomega.Expect(k.Integrations.Frameworks).To(gomega.Equal([]string{"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob"}))
		gomega.Expect(k.ClientConnection.QPS).To(gomega.HaveValue(gomega.BeEquivalentTo(100)))

		pdb := into[policyv1.PodDisruptionBudget](find(ours, "PodDisruptionBudget", "kueue-kueue-timeshare-controller-manager"))
		gomega.Expect(pdb.Spec.MinAvailable.IntValue()).To(gomega.Equal(1))
		gomega.Expect(ofKind(ours, "ServiceMonitor")).To(gomega.HaveLen(1))
		webhookSvc := into[corev1.Service](find(ours, "Service", "kueue-kueue-timeshare-webhook-service"))
		gomega.Expect(webhookSvc.Spec.IPFamilies).To(gomega.Equal([]corev1.IPFamily{"IPv6", "IPv4"}))
		gomega.Expect(*webhookSvc.Spec.IPFamilyPolicy).To(gomega.Equal(corev1.IPFamilyPolicyPreferDualStack))
		metricsSvc := into[corev1.Service](find(ours, "Service", "kueue-kueue-timeshare-metrics-service"))
		gomega.Expect(metricsSvc.Annotations).To(gomega.HaveKeyWithValue("prometheus.io/scrape", "true"))
		for _, o := range ofKind(ours, "MutatingWebhookConfiguration") {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			gomega.Expect(hooks).NotTo(gomega.BeEmpty())
			for _, h := range hooks {
				gomega.Expect(h).To(gomega.HaveKeyWithValue("reinvocationPolicy", "IfNeeded"))
			}
		}
	})

	ginkgo.DescribeTable("rejects what cannot map, naming the key",
		func(extra, wantInError string) {
			file := filepath.Join(ginkgo.GinkgoT().TempDir(), "extra.yaml")
			gomega.Expect(os.WriteFile(file, []byte(extra), 0o600)).To(gomega.Succeed())
			_, err := renderWith(chartDir, upstreamValues, file)
			gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(wantInError)))
		},
		ginkgo.Entry("KueueViz", "enableKueueViz: true\n", "enableKueueViz: true is not supported"),
		ginkgo.Entry("the visibility API's priority and fairness objects", "enableVisibilityAPF: true\n", "enableVisibilityAPF: true is not supported"),
		ginkgo.Entry("the MutatingAdmissionPolicy", "enableMutatingAdmissionPolicy: true\n", "enableMutatingAdmissionPolicy: true is not supported"),
		ginkgo.Entry("a key upstream's chart does not have either", "controllerManager:\n  sidecars: []\n", "additional properties 'sidecars' not allowed"),
		ginkgo.Entry("a feature gate that is not a boolean", "controllerManager:\n  featureGates:\n    - name: PartialAdmission\n      enabled: yes-please\n", "/controllerManager/featureGates/0/enabled"),
		ginkgo.Entry("certificates managed in the configuration file",
			"managerConfig:\n  controllerManagerConfigYaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta2\n    kind: Configuration\n    internalCertManagement:\n      enable: false\n",
			"managerConfig.controllerManagerConfigYaml: internalCertManagement is set by the chart"),
		ginkgo.Entry("a configuration file of another version",
			"managerConfig:\n  controllerManagerConfigYaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta1\n    kind: Configuration\n",
			`managerConfig.controllerManagerConfigYaml: apiVersion "config.kueue.x-k8s.io/v1beta1" is not supported`),
		ginkgo.Entry("a health address with a host",
			"managerConfig:\n  controllerManagerConfigYaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta2\n    kind: Configuration\n    health:\n      healthProbeBindAddress: 127.0.0.1:8081\n",
			"health.healthProbeBindAddress \"127.0.0.1:8081\" is not supported"),
		ginkgo.Entry("a webhook Service port other than 443", "webhookService:\n  ports:\n    - port: 8443\n      targetPort: 9443\n", "webhookService.ports[0].port: 8443 is not supported"),
		ginkgo.Entry("two metrics ports", "metricsService:\n  ports:\n    - port: 8443\n    - port: 9443\n", "metricsService.ports: exactly one port"),
	)
})

// expectSameManager checks that our rendering and upstream's give the manager the same Kueue
// configuration, feature gates and Pod settings, apart from what names the release's own
// objects (the rotator's Service and Secret names) and from the image.
func expectSameManager(ours, theirs []*unstructured.Unstructured) (manager.Config, map[string]string) {
	ginkgo.GinkgoHelper()
	theirCfg, theirGates, theirD := loadManagerConfig(theirs)
	ourCfg, ourGates, ourD := loadManagerConfig(ours)
	gomega.Expect(ourGates).To(gomega.Equal(theirGates))
	// Upstream leaves the Lease namespace empty, which means the Pod's namespace: the release
	// namespace, which ours names.
	gomega.Expect(ourCfg.Kueue.LeaderElection.ResourceNamespace).To(gomega.Equal(namespace))
	gomega.Expect(theirCfg.Kueue.LeaderElection.ResourceNamespace).To(gomega.BeElementOf("", namespace))
	ignore := cmp.Options{
		cmpopts.IgnoreFields(configapi.InternalCertManagement{}, "WebhookServiceName", "WebhookSecretName"),
		cmpopts.IgnoreFields(componentconfig.LeaderElectionConfiguration{}, "ResourceNamespace"),
	}
	gomega.Expect(cmp.Diff(theirCfg.Kueue, ourCfg.Kueue, ignore)).To(gomega.BeEmpty(), "Kueue configuration (-upstream's chart +ours)")

	gomega.Expect(ourD.Spec.Replicas).To(gomega.Equal(theirD.Spec.Replicas))
	gomega.Expect(ourD.Spec.Strategy).To(gomega.Equal(theirD.Spec.Strategy))
	op, tp := ourD.Spec.Template.Spec, theirD.Spec.Template.Spec
	for name, pair := range map[string][2]any{
		"priorityClassName":         {op.PriorityClassName, tp.PriorityClassName},
		"nodeSelector":              {op.NodeSelector, tp.NodeSelector},
		"tolerations":               {op.Tolerations, tp.Tolerations},
		"topologySpreadConstraints": {op.TopologySpreadConstraints, tp.TopologySpreadConstraints},
		"securityContext":           {op.SecurityContext, tp.SecurityContext},
		"hostNetwork":               {op.HostNetwork, tp.HostNetwork},
		"dnsPolicy":                 {op.DNSPolicy, tp.DNSPolicy},
	} {
		gomega.Expect(cmp.Diff(pair[1], pair[0])).To(gomega.BeEmpty(), "Pod %s (-upstream's chart +ours)", name)
	}
	oc, tc := op.Containers[0], tp.Containers[0]
	gomega.Expect(cmp.Diff(tc.Resources, oc.Resources)).To(gomega.BeEmpty(), "resources")
	gomega.Expect(cmp.Diff(tc.SecurityContext, oc.SecurityContext)).To(gomega.BeEmpty(), "container securityContext")
	// Probes: the same timings; ours name the health port instead of its number.
	probeTimes := cmpopts.IgnoreFields(corev1.Probe{}, "ProbeHandler")
	gomega.Expect(cmp.Diff(tc.ReadinessProbe, oc.ReadinessProbe, probeTimes)).To(gomega.BeEmpty(), "readinessProbe")
	gomega.Expect(cmp.Diff(tc.LivenessProbe, oc.LivenessProbe, probeTimes)).To(gomega.BeEmpty(), "livenessProbe")
	level, _ := flagValue(oc.Args, "zap-log-level")
	theirLevel, _ := flagValue(tc.Args, "zap-log-level")
	gomega.Expect(level).To(gomega.Equal(theirLevel))
	// Upstream's image is not ours: the manager stays kueue-timeshare.
	gomega.Expect(oc.Image).To(gomega.HavePrefix("kueue-timeshare:"))
	return ourCfg, ourGates
}
