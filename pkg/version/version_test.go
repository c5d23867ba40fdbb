package version

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFromBuildInfo(t *testing.T) {
	cases := map[string]struct {
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		"stamped by the build": {
			version: "v0.1.0", commit: "abc123",
			bi:   &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fromvcs"}}},
			want: Info{Version: "v0.1.0", KueueVersion: KueueVersion, GitCommit: "abc123"},
		},
		"commit from the toolchain's VCS stamp": {
			version: "v0.0.0-dev",
			bi:      &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fromvcs"}}},
			want:    Info{Version: "v0.0.0-dev", KueueVersion: KueueVersion, GitCommit: "fromvcs"},
		},
		"no build information": {
			version: "v0.1.0",
			want:    Info{Version: "v0.1.0", KueueVersion: KueueVersion, GitCommit: "unknown"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := fromBuildInfo(tc.version, tc.commit, tc.bi)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Info{}, "GoVersion", "Platform")); diff != "" {
				t.Errorf("fromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

// KueueVersion names the release go.mod builds against, so an upgrade cannot leave it behind.
func TestKueueVersionMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var required string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "sigs.k8s.io/kueue" {
			required = f[1]
		}
	}
	if required != KueueVersion {
		t.Errorf("KueueVersion = %q, go.mod requires sigs.k8s.io/kueue %q", KueueVersion, required)
	}
}
