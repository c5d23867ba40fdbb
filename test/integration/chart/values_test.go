package chart_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

var _ = ginkgo.Describe("helm lint", func() {
	ginkgo.DescribeTable("is clean in strict mode",
		func(sets ...string) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			out, err := helmCmd("", args...)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(out).To(gomega.ContainSubstring("0 chart(s) failed"))
			gomega.Expect(out).NotTo(gomega.ContainSubstring("[WARNING]"))
			gomega.Expect(out).NotTo(gomega.ContainSubstring("[ERROR]"))
		},
		ginkgo.Entry("with default values"),
		ginkgo.Entry("with cert-manager and a ServiceMonitor", "certManager.enabled=true", "metrics.serviceMonitor.enabled=true"),
		ginkgo.Entry("without the visibility API and CRDs", "visibility.enabled=false", "crds.install=false"),
	)
})

var _ = ginkgo.Describe("values.schema.json", func() {
	ginkgo.DescribeTable("rejects values of the wrong type or out of range, naming them",
		func(set, wantInError string) {
			_, err := helmCmd("", "template", release, chartDir, "--set", set)
			gomega.Expect(err).To(gomega.HaveOccurred())
			gomega.Expect(err.Error()).To(gomega.ContainSubstring("schema"))
			gomega.Expect(err.Error()).To(gomega.ContainSubstring(wantInError))
		},
		ginkgo.Entry("replicas is a number", "replicas=two", "/replicas"),
		ginkgo.Entry("reclaimResolveMethod is LCA or Queue", "timeshare.reclaimResolveMethod=Root", "/timeshare/reclaimResolveMethod"),
		ginkgo.Entry("a feature gate is a boolean", "featureGates.MinRuntimeProtection=maybe", "/featureGates/MinRuntimeProtection"),
		ginkgo.Entry("an upstream feature gate is a boolean too", "featureGates.TopologyAwareScheduling=1", "/featureGates/TopologyAwareScheduling"),
		ginkgo.Entry("a default runtime is a duration", "timeshare.defaultPreemptMinRuntime=4 hours", "/timeshare/defaultPreemptMinRuntime"),
		ginkgo.Entry("a requeue delay is a duration", "timeshare.defaultRequeueDelay=soon", "/timeshare/defaultRequeueDelay"),
		ginkgo.Entry("heads per cycle are at least one", "timeshare.headsPerCycle=0", "/timeshare/headsPerCycle"),
		ginkgo.Entry("pending-status writers are at most 64", "timeshare.pendingStatusWriters=65", "/timeshare/pendingStatusWriters"),
		ginkgo.Entry("a notice is a duration", "timeshare.defaultNoticePeriod=briefly", "/timeshare/defaultNoticePeriod"),
		ginkgo.Entry("a long-wait threshold is a duration", "timeshare.metrics.longWaitThreshold=a while", "/timeshare/metrics/longWaitThreshold"),
		ginkgo.Entry("an estimate refresh interval is a duration", "timeshare.admissionEstimates.refreshInterval=often", "/timeshare/admissionEstimates/refreshInterval"),
		ginkgo.Entry("an integration is one Kueue knows", "integrations.frameworks={batch/jobs}", "/integrations/frameworks/0"),
		ginkgo.Entry("a port is in range", "webhook.port=70000", "/webhook/port"),
		ginkgo.Entry("a pull policy is Kubernetes'", "image.pullPolicy=Sometimes", "/image/pullPolicy"),
		ginkgo.Entry("a misspelt value is refused", "timeshare.defaultPreemptMinRunTime=1m", "defaultPreemptMinRunTime"),
		ginkgo.Entry("certManager.enabled is a boolean", "certManager.enabled=yes", "/certManager/enabled"),
	)

	ginkgo.It("refuses Configuration fields the chart owns, naming the value to use instead", func() {
		_, err := helmCmd("", "template", release, chartDir, "--set", "kueueConfiguration.featureGates.MultiKueue=false")
		gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("kueueConfiguration.featureGates is set by the chart")))
	})

	ginkgo.It("has a timeshare value for each field of the configuration's timeshare section", func() {
		var keys []string
		fields := timeshareFields()
		var walk func(prefix string, props map[string]schemaNode)
		walk = func(prefix string, props map[string]schemaNode) {
			for k, v := range props {
				// An object the configuration takes whole (a budget) is one field.
				if len(v.Properties) > 0 && !slices.Contains(fields, prefix+k) {
					walk(prefix+k+".", v.Properties)
					continue
				}
				keys = append(keys, prefix+k)
			}
		}
		walk("", readSchema().Properties["timeshare"].Properties)
		gomega.Expect(keys).To(gomega.ConsistOf(fields))
	})

	ginkgo.It("lists every job integration the manager knows, and only those", func() {
		var known []string
		gomega.Expect(jobframework.ForEachIntegration(func(name string, _ jobframework.IntegrationCallbacks) error {
			known = append(known, name)
			return nil
		})).To(gomega.Succeed())
		s := readSchema()
		var items struct {
			Enum []string `json:"enum"`
		}
		gomega.Expect(json.Unmarshal(s.Properties["integrations"].Properties["frameworks"].Items, &items)).To(gomega.Succeed())
		sort.Strings(known)
		sort.Strings(items.Enum)
		gomega.Expect(cmp.Diff(known, items.Enum)).To(gomega.BeEmpty(), "schema enum (-manager +schema)")
	})

	ginkgo.It("documents every kueue-timeshare feature gate the manager registers", func() {
		documented := readSchema().Properties["featureGates"].Properties
		for _, gate := range ourGates {
			gomega.Expect(documented).To(gomega.HaveKey(gate))
		}
		registered := registeredGates()
		gomega.Expect(registered).To(gomega.ContainElement("TimeBasedSamePriorityPreemption"))
		for _, gate := range registered {
			gomega.Expect(ourGates).To(gomega.ContainElement(gate), "pkg/features registers %s: add it to values.schema.json, ourGates and docs/configuration.md", gate)
		}
	})
})

// ourGates are kueue-timeshare's feature gates, as the chart documents them.
var ourGates = []string{"TimeBasedSamePriorityPreemption", "MinRuntimeProtection", "PreemptionToleration", "ExpectedRuntimeRequeue", "HandoverAfterVictimTermination", "PreemptionNotice", "PreemptionBudget"}

// registeredGates are the gates pkg/features declares, read from its source: the package keeps
// its list private, and upstream's gates share the same process-wide registry.
func registeredGates() []string {
	ginkgo.GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(root, "pkg", "features", "*.go"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	decl := regexp.MustCompile(`(?m)^\s*\w+\s+featuregate\.Feature\s*=\s*"(\w+)"`)
	var gates []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			gates = append(gates, m[1])
		}
	}
	return gates
}

type schemaNode struct {
	Properties map[string]schemaNode `json:"properties"`
	Items      json.RawMessage       `json:"items"`
}

func readSchema() schemaNode {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var s schemaNode
	gomega.Expect(json.Unmarshal(data, &s)).To(gomega.Succeed())
	return s
}

var _ = ginkgo.Describe("values reach the manager", func() {
	// loadRendered loads the rendered ConfigMap's file with the rendered --feature-gates, as the
	// manager binary does in the Pod. Gates are process-wide: the ones a case sets are put back.
	loadRendered := func(sets ...string) (manager.Config, []string, error) {
		ginkgo.GinkgoHelper()
		objs, err := render(sets...)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		cm := into[corev1.ConfigMap](find(objs, "ConfigMap", fullname+"-manager-config"))
		path := filepath.Join(ginkgo.GinkgoT().TempDir(), "config.yaml")
		gomega.Expect(os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600)).To(gomega.Succeed())
		_, c := managerContainer(objs)
		gomega.Expect(c.Args).To(gomega.ContainElement("--config=/etc/kueue-timeshare/" + "config.yaml"))
		gates, _ := flagValue(c.Args, "feature-gates")
		restoreGates(gates)
		_, cfg, err := manager.LoadConfig(scheme, path, gates)
		return cfg, c.Args, err
	}

	ginkgo.It("renders a configuration the manager loads, with the defaults and the names of the chart's objects", func() {
		cfg, args, err := loadRendered()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		_, hasGates := flagValue(args, "feature-gates")
		gomega.Expect(hasGates).To(gomega.BeFalse(), "no --feature-gates unless a gate is set")
		want := tsconfig.Configuration{
			DefaultPreemptMinRuntime: &metav1.Duration{},
			DefaultReclaimMinRuntime: &metav1.Duration{},
			ReclaimResolveMethod:     tsconfig.ReclaimResolveLCA,
			DefaultRequeueDelay:      &metav1.Duration{Duration: 10 * time.Minute},
			RuntimeClock:             tsconfig.RuntimeClockAdmitted,
			DefaultNoticePeriod:      &metav1.Duration{},
			HeadsPerCycle:            ptr.To[int32](1),
			PendingStatusWriters:     ptr.To[int32](0),
			MaxHandoverHold:          &metav1.Duration{Duration: 5 * time.Minute},
			AdmissionEstimates:       tsconfig.AdmissionEstimates{RefreshInterval: &metav1.Duration{Duration: 5 * time.Second}},
			Metrics:                  tsconfig.Metrics{LongWaitThreshold: &metav1.Duration{Duration: time.Hour}},
		}
		gomega.Expect(cmp.Diff(want, cfg.Timeshare)).To(gomega.BeEmpty())
		k := cfg.Kueue
		gomega.Expect(*k.Namespace).To(gomega.Equal(namespace))
		gomega.Expect(*k.InternalCertManagement.Enable).To(gomega.BeTrue())
		// Upstream's rotator derives the webhook configuration names from the Service name.
		gomega.Expect(*k.InternalCertManagement.WebhookServiceName).To(gomega.Equal(fullname + "-webhook-service"))
		gomega.Expect(*k.InternalCertManagement.WebhookSecretName).To(gomega.Equal(fullname + "-webhook-server-cert"))
		gomega.Expect(*k.LeaderElection.LeaderElect).To(gomega.BeTrue())
		gomega.Expect(k.LeaderElection.ResourceNamespace).To(gomega.Equal(namespace))
		gomega.Expect(*k.Webhook.Port).To(gomega.Equal(9443))
		gomega.Expect(k.Health.HealthProbeBindAddress).To(gomega.Equal(":8081"))
		gomega.Expect(k.Metrics.BindAddress).To(gomega.Equal(":8443"))
		gomega.Expect(k.Integrations.Frameworks).To(gomega.ContainElements("batch/job", "pod", "jobset.x-k8s.io/jobset"))
		gomega.Expect(k.Controller.GroupKindConcurrency).To(gomega.HaveKeyWithValue("Workload.kueue.x-k8s.io", 10))
	})

	ginkgo.It("passes the timeshare defaults and Kueue fields through", func() {
		cfg, _, err := loadRendered(
			"timeshare.reclaimResolveMethod=Queue",
			"timeshare.defaultPreemptMinRuntime=5m",
			"timeshare.defaultReclaimMinRuntime=1h30m",
			"timeshare.defaultRequeueDelay=2m",
			"timeshare.runtimeClock=PodsReady",
			"timeshare.headsPerCycle=32",
			"timeshare.pendingStatusWriters=4",
			"timeshare.admissionEstimates.refreshInterval=30s",
			"timeshare.metrics.longWaitThreshold=30m",
			"kueueConfiguration.manageJobsWithoutQueueName=true",
			"kueueConfiguration.waitForPodsReady.timeout=7m",
			"integrations.frameworks={batch/job,kubeflow.org/pytorchjob}",
			"webhook.port=9555",
		)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		want := tsconfig.Configuration{
			DefaultPreemptMinRuntime: &metav1.Duration{Duration: 5 * time.Minute},
			DefaultReclaimMinRuntime: &metav1.Duration{Duration: 90 * time.Minute},
			ReclaimResolveMethod:     tsconfig.ReclaimResolveQueue,
			DefaultRequeueDelay:      &metav1.Duration{Duration: 2 * time.Minute},
			RuntimeClock:             tsconfig.RuntimeClockPodsReady,
			DefaultNoticePeriod:      &metav1.Duration{},
			HeadsPerCycle:            ptr.To[int32](32),
			PendingStatusWriters:     ptr.To[int32](4),
			MaxHandoverHold:          &metav1.Duration{Duration: 5 * time.Minute},
			AdmissionEstimates:       tsconfig.AdmissionEstimates{RefreshInterval: &metav1.Duration{Duration: 30 * time.Second}},
			Metrics:                  tsconfig.Metrics{LongWaitThreshold: &metav1.Duration{Duration: 30 * time.Minute}},
		}
		gomega.Expect(cmp.Diff(want, cfg.Timeshare)).To(gomega.BeEmpty())
		gomega.Expect(cfg.Kueue.ManageJobsWithoutQueueName).To(gomega.BeTrue())
		gomega.Expect(cfg.Kueue.WaitForPodsReady.Timeout.Duration).To(gomega.Equal(7 * time.Minute))
		gomega.Expect(cfg.Kueue.Integrations.Frameworks).To(gomega.Equal([]string{"batch/job", "kubeflow.org/pytorchjob"}))
		gomega.Expect(*cfg.Kueue.Webhook.Port).To(gomega.Equal(9555))
	})

	// Gates are process-wide (loadRendered puts them back): each case sets PreemptionNotice itself.
	ginkgo.It("passes a default notice through, which the manager refuses while PreemptionNotice is off", func() {
		_, _, err := loadRendered("timeshare.defaultNoticePeriod=5m", "featureGates.PreemptionNotice=false")
		gomega.Expect(err).To(gomega.HaveOccurred())
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("timeshare.defaultNoticePeriod: Forbidden: needs the PreemptionNotice feature gate"))

		cfg, _, err := loadRendered("timeshare.defaultNoticePeriod=5m", "featureGates.PreemptionNotice=true")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(cfg.Timeshare.DefaultNoticePeriod).To(gomega.Equal(&metav1.Duration{Duration: 5 * time.Minute}))
	})

	ginkgo.It("renders every gate set, sorted, into --feature-gates", func() {
		sets := []string{"featureGates.TopologyAwareScheduling=true", "featureGates.VisibilityOnDemand=false"}
		for _, g := range ourGates {
			sets = append(sets, "featureGates."+g+"=false")
		}
		objs, err := render(sets...)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		_, c := managerContainer(objs)
		gates, _ := flagValue(c.Args, "feature-gates")
		gomega.Expect(gates).To(gomega.Equal("ExpectedRuntimeRequeue=false,HandoverAfterVictimTermination=false,MinRuntimeProtection=false,PreemptionBudget=false,PreemptionNotice=false,PreemptionToleration=false," +
			"TimeBasedSamePriorityPreemption=false,TopologyAwareScheduling=true,VisibilityOnDemand=false"))
	})

	ginkgo.It("turns every gate of ours off through --feature-gates", func() {
		known := utilfeature.DefaultMutableFeatureGate.GetAll()
		var sets []string
		for _, g := range ourGates {
			gomega.Expect(known).To(gomega.HaveKey(featuregate.Feature(g)), "the manager does not register %s", g)
			sets = append(sets, "featureGates."+g+"=false")
		}
		_, _, err := loadRendered(sets...)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		for _, g := range ourGates {
			gomega.Expect(utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g))).To(gomega.BeFalse(), g)
		}
	})

	ginkgo.DescribeTable("sets a gate the manager knows",
		func(gate string, value bool) {
			_, _, err := loadRendered("featureGates." + gate + "=" + map[bool]string{true: "true", false: "false"}[value])
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(gate))).To(gomega.Equal(value))
		},
		ginkgo.Entry("ours, off", "TimeBasedSamePriorityPreemption", false),
		ginkgo.Entry("upstream's, on", "TopologyAwareScheduling", true),
		ginkgo.Entry("upstream's, off", "VisibilityOnDemand", false),
	)

	ginkgo.It("turns the visibility server off with the visibility API", func() {
		_, args, err := loadRendered("visibility.enabled=false")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gates, _ := flagValue(args, "feature-gates")
		gomega.Expect(gates).To(gomega.Equal("VisibilityOnDemand=false"))
		gomega.Expect(utilfeature.DefaultFeatureGate.Enabled("VisibilityOnDemand")).To(gomega.BeFalse())
	})

	ginkgo.It("hands certificates to cert-manager and reads them from where it mounts them", func() {
		cfg, args, err := loadRendered("certManager.enabled=true")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(*cfg.Kueue.InternalCertManagement.Enable).To(gomega.BeFalse())
		dir, ok := flagValue(args, "metrics-cert-dir")
		gomega.Expect(ok).To(gomega.BeTrue())
		gomega.Expect(dir).To(gomega.Equal(manager.DefaultMetricsCertDir))
	})
})

// restoreGates puts back, after the spec, the gates named in a --feature-gates value.
func restoreGates(gates string) {
	if gates == "" {
		return
	}
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	prior := map[string]bool{}
	for _, kv := range strings.Split(gates, ",") {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := known[featuregate.Feature(name)]; ok {
			prior[name] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name))
		}
	}
	ginkgo.DeferCleanup(func() {
		gomega.Expect(utilfeature.DefaultMutableFeatureGate.SetFromMap(prior)).To(gomega.Succeed())
	})
}

var _ = ginkgo.Describe("RBAC", func() {
	ginkgo.It("grants no wildcard verb, resource or API group", func() {
		for _, sets := range [][]string{nil, {"certManager.enabled=true", "metrics.serviceMonitor.enabled=true"}} {
			rendered, err := render(sets...)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			var checked int
			for _, kind := range []string{"ClusterRole", "Role"} {
				for _, o := range ofKind(rendered, kind) {
					for i, r := range into[rbacv1.ClusterRole](o).Rules {
						for field, values := range map[string][]string{
							"verbs": r.Verbs, "resources": r.Resources, "apiGroups": r.APIGroups,
							"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
						} {
							for _, v := range values {
								gomega.Expect(v).NotTo(gomega.ContainSubstring("*"), "%s %s rule %d %s", kind, o.GetName(), i, field)
							}
						}
						gomega.Expect(r.Verbs).NotTo(gomega.BeEmpty())
						checked++
					}
				}
			}
			gomega.Expect(checked).To(gomega.BeNumerically(">", 40))
		}
	})

	ginkgo.It("grants least privilege where it matters: no escalation, Secrets and Leases only in the release namespace, cluster-wide writes only by name", func() {
		rendered, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		// Resources whose access amounts to more than the manager's job: RBAC itself, credentials,
		// and running commands in or reaching into Pods and Nodes.
		forbidden := map[string]bool{
			"roles": true, "rolebindings": true, "clusterroles": true, "clusterrolebindings": true,
			"serviceaccounts": true, "serviceaccounts/token": true, "certificatesigningrequests": true,
			"pods/exec": true, "pods/attach": true, "pods/portforward": true, "pods/proxy": true,
			"nodes/proxy": true, "services/proxy": true, "nodes/status": true,
		}
		writes := []string{"create", "update", "patch", "delete", "deletecollection"}
		// Cluster-scoped objects of other components the manager may write, and then only by name.
		byName := map[string]bool{"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true, "customresourcedefinitions": true}
		for _, kind := range []string{"ClusterRole", "Role"} {
			for _, o := range ofKind(rendered, kind) {
				for i, r := range into[rbacv1.ClusterRole](o).Rules {
					where := fmt.Sprintf("%s %s rule %d", kind, o.GetName(), i)
					gomega.Expect(r.Verbs).NotTo(gomega.ContainElement(gomega.BeElementOf("escalate", "bind", "impersonate")), where)
					for _, res := range r.Resources {
						gomega.Expect(forbidden[res]).To(gomega.BeFalse(), "%s grants %s", where, res)
						switch {
						case res == "secrets", res == "leases":
							gomega.Expect(kind).To(gomega.Equal("Role"), "%s: %s only in a namespace", where, res)
							gomega.Expect(o.GetNamespace()).To(gomega.Equal(namespace), "%s: %s only in the release namespace", where, res)
						case res == "nodes":
							gomega.Expect(r.Verbs).NotTo(gomega.ContainElement(gomega.BeElementOf(writes)), "%s writes nodes", where)
						case byName[res]:
							if slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(writes, v) }) {
								gomega.Expect(r.ResourceNames).NotTo(gomega.BeEmpty(), "%s writes any %s", where, res)
							}
						}
					}
				}
			}
		}
		// Bindings give the roles to the manager's ServiceAccount only.
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, o := range ofKind(rendered, kind) {
				for _, sub := range into[rbacv1.ClusterRoleBinding](o).Subjects {
					gomega.Expect(sub).To(gomega.Equal(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname + "-controller-manager", Namespace: namespace}), "%s %s", kind, o.GetName())
				}
			}
		}
	})

	ginkgo.It("holds upstream's manager rules, naming this release's webhook configurations", func() {
		rendered, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		data, err := os.ReadFile(filepath.Join(chartDir, "generated", "rbac", "role.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var upstream rbacv1.ClusterRole
		gomega.Expect(yaml.Unmarshal([]byte(strings.TrimPrefix(string(data), "---\n")), &upstream)).To(gomega.Succeed())
		gomega.Expect(upstream.Rules).NotTo(gomega.BeEmpty())
		renames := map[string]string{
			"mutating-webhook-configuration":   fullname + "-mutating-webhook-configuration",
			"validating-webhook-configuration": fullname + "-validating-webhook-configuration",
		}
		for i := range upstream.Rules {
			for j, n := range upstream.Rules[i].ResourceNames {
				if to, ok := renames[n]; ok {
					upstream.Rules[i].ResourceNames[j] = to
				}
			}
		}
		got := into[rbacv1.ClusterRole](find(rendered, "ClusterRole", fullname+"-manager-role"))
		gomega.Expect(got.Rules).To(gomega.HaveLen(len(upstream.Rules) + 3))
		gomega.Expect(cmp.Diff(upstream.Rules, got.Rules[:len(upstream.Rules)])).To(gomega.BeEmpty())
		// The renamed configurations are the ones the chart renders, so the rotator may update them.
		find(rendered, "MutatingWebhookConfiguration", renames["mutating-webhook-configuration"])
		find(rendered, "ValidatingWebhookConfiguration", renames["validating-webhook-configuration"])

		binding := into[rbacv1.ClusterRoleBinding](find(rendered, "ClusterRoleBinding", fullname+"-manager-rolebinding"))
		gomega.Expect(binding.RoleRef.Name).To(gomega.Equal(got.Name))
		gomega.Expect(binding.Subjects).To(gomega.Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-controller-manager", Namespace: namespace}}))
	})
})
