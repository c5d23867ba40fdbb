package util

import (
	"io"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// SuiteLogger is the logger of an envtest suite, writing to w (the suite's GinkgoWriter, shown only
// for failed specs) and made controller-runtime's. TEST_LOG_VERBOSITY=N raises the verbosity: 4 or
// 5 shows protections and their resolution, 6 every victim policy decision.
func SuiteLogger(w io.Writer) logr.Logger {
	opts := []zap.Opts{zap.WriteTo(w), zap.UseDevMode(true)}
	if v, err := strconv.Atoi(os.Getenv("TEST_LOG_VERBOSITY")); err == nil {
		opts = append(opts, zap.Level(zapcore.Level(-v)))
	}
	log := zap.New(opts...)
	ctrl.SetLogger(log)
	return log
}
