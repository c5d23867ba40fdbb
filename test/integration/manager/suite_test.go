package manager_test

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var env *util.Env

func TestManager(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Manager integration suite")
}

var _ = ginkgo.BeforeSuite(func() {
	log := zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(log)
	var err error
	env, err = util.Start(util.Settings{Log: log})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
})

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})
