// Package release_test runs `make release` on a clone of the repository's HEAD and checks what it
// writes, as a user downloading the release would.
package release_test

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

func TestRelease(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "make release suite")
}
