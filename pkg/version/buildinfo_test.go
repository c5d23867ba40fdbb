// An external test package: the package under test must not import Kueue's metrics, or they
// would be initialised before it, as they would not be in the manager.
package version_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	kueueversion "sigs.k8s.io/kueue/pkg/version"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/version"
)

// kueue_build_info, as the manager serves it, describes this build (ours and the Kueue release
// under it), not upstream's placeholder, whether or not the build stamped anything.
func TestBuildInfoGauge(t *testing.T) {
	i := version.Stamped()
	kueuemetrics.Register()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	for _, f := range families {
		if f.GetName() != "kueue_build_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			got = map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
		}
	}
	want := map[string]string{"git_version": i.Version + "+kueue-" + i.KueueVersion, "git_commit": i.GitCommit}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k, _ string) bool { _, ok := want[k]; return !ok })); diff != "" {
		t.Errorf("kueue_build_info labels (-want +got):\n%s", diff)
	}
	if kueueversion.GitVersion != want["git_version"] {
		t.Errorf("upstream GitVersion = %q, want %q", kueueversion.GitVersion, want["git_version"])
	}
}
