// Package plugin_test runs kubectl-timeshare's commands against a live manager and checks what
// they print.
package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
)

var (
	env *util.Env
	// clk drives our scheduler and is the plugin's "now": turns and protections end when the
	// test says so.
	clk        *clocktesting.FakeClock
	kubeconfig string
)

func TestPlugin(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "kubectl-timeshare suite")
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
	kubeconfig = filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
	gomega.Expect(env.ControlPlane.WriteAdminKubeconfig(kubeconfig)).To(gomega.Succeed())
	ctx := context.Background()
	gomega.Expect(env.Client.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})).To(gomega.Succeed())
	for name, value := range map[string]int32{"low": 10, "high": 100} {
		gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})).To(gomega.Succeed())
	}
})

// The manager stamps conditions by clk and the API server creation times by the real clock: keep
// clk ahead, as it would be if both were real.
var _ = ginkgo.BeforeEach(func() { util.KeepAhead(clk) })

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})

// run runs the plugin in-process as a user would from the command line, with the suite's clock,
// and returns its exit code, stdout and stderr.
func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := app.Run(context.Background(), args, app.Streams{Out: &out, ErrOut: &errOut},
		app.Options{Config: env.ControlPlane.Config, VisibilityConfig: env.VisibilityConfig, Now: clk.Now})
	return code, out.String(), errOut.String()
}

// queuesJSON runs `queues NAME -o json` and decodes it.
func queuesJSON(g gomega.Gomega, args ...string) app.QueuesReport {
	code, out, errOut := run(append([]string{"queues", "-o", "json"}, args...)...)
	g.Expect(code).To(gomega.Equal(0), errOut)
	var r app.QueuesReport
	g.Expect(json.Unmarshal([]byte(out), &r)).To(gomega.Succeed(), out)
	return r
}

func namespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
	return ns.Name
}

// cohort creates a Cohort under parent (a root if empty) with spec.preemption set to preemption.
func cohort(ctx context.Context, name, parent string, preemption map[string]any) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
	u.SetName(name)
	if parent != "" {
		gomega.Expect(unstructured.SetNestedField(u.Object, parent, "spec", "parentName")).To(gomega.Succeed())
	}
	if preemption != nil {
		gomega.Expect(unstructured.SetNestedField(u.Object, preemption, "spec", "preemption")).To(gomega.Succeed())
	}
	gomega.Expect(env.Client.Create(ctx, u)).To(gomega.Succeed())
}

// job asks for cpu in the LocalQueue lq, at the WorkloadPriorityClass priority ("" for none).
func job(ns, lq, name, cpu, priority string) *batchv1.Job {
	j := util.CPUJob(ns, name, lq, cpu)
	if priority != "" {
		j.Labels[constants.WorkloadPriorityClassLabel] = priority
	}
	return j
}

func unsuspended(g gomega.Gomega, ctx context.Context, j *batchv1.Job) bool {
	return util.Unsuspended(g, ctx, env.Client, j)
}

func workloadOf(g gomega.Gomega, ctx context.Context, j *batchv1.Job) *kueue.Workload {
	return util.WorkloadOf(g, ctx, env.Client, j)
}

// condition returns wl's condition t, failing g when there is none.
func condition(g gomega.Gomega, wl *kueue.Workload, t string) metav1.Condition {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, t)
	g.Expect(c).NotTo(gomega.BeNil(), "workload %s has no %s condition", wl.Name, t)
	return *c
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
