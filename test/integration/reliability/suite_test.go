// Package reliability_test checks that the manager loses no workload and breaks no promise when
// things go wrong: the manager process killed (SIGKILL) and restarted in the middle of admissions
// and preemptions, two managers with leader election and the leader killed, API errors injected
// into the scheduler's client, and kube-apiserver and etcd stopped and started again under the
// running manager, with etcd compacted so that its watches get 410 Gone. Each spec runs Jobs
// against ClusterQueues with every kueue-timeshare policy on, records every Workload transition
// from a watch of its own, and checks the invariants in docs/reliability.md.
//
// RELIABILITY_LONG=1 runs the long form (more Jobs, kills, handovers and outages), as
// `make test-reliability` does; RELIABILITY_SEED=n replays the random choices of an earlier run
// (the seed is printed); RELIABILITY_LOG_DIR=dir keeps every manager's log there.
package reliability_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	timeout  = 60 * time.Second
	interval = 200 * time.Millisecond
	// managerNamespace is Kueue's namespace in the managers' configuration; it holds the Lease.
	managerNamespace = "kueue-system"
)

var (
	root    string
	scheme  *runtime.Scheme
	suiteLg logr.Logger
	// long selects the long form (RELIABILITY_LONG=1).
	long bool
	// seed drives every random choice of the run (RELIABILITY_SEED=n to replay one).
	seed uint64
	// scratch holds what the whole run shares (the manager binary).
	scratch string
)

func TestReliability(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Reliability suite: restarts, leader election, API faults, control-plane outages")
}

var _ = ginkgo.BeforeSuite(func() {
	var err error
	scratch, err = os.MkdirTemp("", "kueue-timeshare-reliability-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	// What runs in this process (envtest, the API-fault spec's manager) logs to a file, beside
	// the manager processes' logs when RELIABILITY_LOG_DIR keeps them.
	logDir := scratch
	if d := os.Getenv("RELIABILITY_LOG_DIR"); d != "" {
		gomega.Expect(os.MkdirAll(d, 0o755)).To(gomega.Succeed())
		logDir = d
	}
	logFile, err := os.Create(filepath.Join(logDir, "in-process.log"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(logFile.Close)
	suiteLg = util.SuiteLogger(logFile)
	ginkgo.GinkgoWriter.Printf("reliability: this process logs to %s\n", logFile.Name())
	root, err = controlplane.FindRoot()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	scheme, err = manager.NewScheme()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	long = os.Getenv("RELIABILITY_LONG") != ""
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("RELIABILITY_SEED"); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "RELIABILITY_SEED")
	}
	ginkgo.GinkgoWriter.Printf("reliability: seed %d (RELIABILITY_SEED=%d replays it), long form %t\n", seed, seed, long)
})

var _ = ginkgo.AfterSuite(func() {
	if scratch != "" {
		gomega.Expect(os.RemoveAll(scratch)).To(gomega.Succeed())
	}
})

var (
	buildOnce sync.Once
	binary    string
)

// managerBinary builds cmd/kueue-timeshare once per run: the restart and leader election specs
// run it as a process of its own, so that it can be killed.
func managerBinary() string {
	ginkgo.GinkgoHelper()
	buildOnce.Do(func() {
		out := filepath.Join(scratch, "kueue-timeshare")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kueue-timeshare")
		cmd.Dir = root
		msg, err := cmd.CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "go build ./cmd/kueue-timeshare: %s", msg)
		binary = out
	})
	gomega.Expect(binary).NotTo(gomega.BeEmpty(), "the manager binary failed to build earlier")
	return binary
}

// Priority classes of every spec: low and high, and tolerant, at low's value, which priorities
// below 1000 (all of this suite's) cannot preempt during its first tolerationSeconds.
const (
	tolerationSeconds = 8
	lowPriority       = 10
	highPriority      = 100
)

// createBaseObjects creates the ResourceFlavor and priority classes every spec uses.
func createBaseObjects(ctx context.Context, c client.Client) {
	ginkgo.GinkgoHelper()
	gomega.Expect(c.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}})).To(gomega.Succeed())
	gomega.Expect(c.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: lowPriority})).To(gomega.Succeed())
	gomega.Expect(c.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: highPriority})).To(gomega.Succeed())
	gomega.Expect(c.Create(ctx, &kueue.WorkloadPriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "tolerant", Annotations: map[string]string{
			annotations.MinimumPreemptablePriority: "1000",
			annotations.TolerationSeconds:          strconv.Itoa(tolerationSeconds),
		}},
		Value: lowPriority,
	})).To(gomega.Succeed())
	// A Kubernetes PriorityClass too, so that the toleration store reads both kinds.
	gomega.Expect(c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "reliability-unused"}, Value: 1})).To(gomega.Succeed())
}

func createNamespace(ctx context.Context, c client.Client, name string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(gomega.Succeed())
}

// report prints a figure of the run to the spec's output and to its report entries.
func report(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	ginkgo.GinkgoWriter.Println("reliability: " + msg)
	ginkgo.AddReportEntry(msg)
}
