package timebased_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var (
	env *util.Env
	// clk drives our scheduler: windows expire when the test says so, not after real minutes.
	clk *clocktesting.FakeClock
)

func TestTimeBased(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Time-based same-priority preemption suite")
}

var _ = ginkgo.BeforeSuite(func() {
	opts := []zap.Opts{zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)}
	// TEST_LOG_VERBOSITY=6 shows the scheduler's and the victim policy's decisions.
	if v, err := strconv.Atoi(os.Getenv("TEST_LOG_VERBOSITY")); err == nil {
		opts = append(opts, zap.Level(zapcore.Level(-v)))
	}
	log := zap.New(opts...)
	ctrl.SetLogger(log)
	clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	var err error
	env, err = util.Start(util.Settings{Log: log, Clock: clk})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
})

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})
