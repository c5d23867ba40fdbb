// Package version says which kueue-timeshare this is and which Kueue release it is built on.
//
// It also stamps upstream's version variables, which Kueue's kueue_build_info gauge reads when
// its metrics package initialises. That works without ldflags because Go initialises packages in
// import-path order among those whose imports are ready: this package imports only upstream's
// version package, so it runs before sigs.k8s.io/kueue/pkg/metrics.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	kueueversion "sigs.k8s.io/kueue/pkg/version"
)

// Version is kueue-timeshare's release, set by the build (-ldflags -X ...Version=v0.1.0).
var Version = "v0.0.0-dev"

// GitCommit is the commit built; the build may set it, otherwise the Go toolchain's VCS stamp is
// used when the binary was built from a git checkout.
var GitCommit = ""

// KueueVersion is the sigs.k8s.io/kueue release in go.mod (a test keeps the two equal). Test
// binaries carry no dependency list in their build information, so it is not read from there.
const KueueVersion = "v0.19.2"

// Info is what --version prints and what the build_info gauge carries.
type Info struct {
	Version      string
	KueueVersion string
	GitCommit    string
	GoVersion    string
	Platform     string
}

// Get reads the build's facts.
func Get() Info {
	return fromBuildInfo(Version, GitCommit, readBuildInfo())
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

func fromBuildInfo(v, commit string, bi *debug.BuildInfo) Info {
	info := Info{Version: v, GitCommit: commit, KueueVersion: KueueVersion, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info.GitCommit == "" && bi != nil {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.GitCommit = s.Value
			}
		}
	}
	if info.GitCommit == "" {
		info.GitCommit = "unknown"
	}
	return info
}

// String is the one line --version prints.
func (i Info) String() string {
	return i.StringFor("kueue-timeshare")
}

// StringFor is String for another of the project's programs (the kubectl plugin).
func (i Info) StringFor(program string) string {
	return fmt.Sprintf("%s %s (Kueue %s, commit %s, %s %s)", program, i.Version, i.KueueVersion, i.GitCommit, i.GoVersion, i.Platform)
}

// KueueGitVersion is the value upstream's git_version label gets: ours, with the Kueue release as
// semantic-version build metadata, e.g. v0.1.0+kueue-v0.19.2.
func (i Info) KueueGitVersion() string {
	return i.Version + "+kueue-" + i.KueueVersion
}

var stamped = stamp()

// stamp makes upstream's version (logged and served as kueue_build_info) describe this build.
func stamp() Info {
	i := Get()
	kueueversion.GitVersion = i.KueueGitVersion()
	kueueversion.GitCommit = i.GitCommit
	return i
}

// Stamped returns the facts stamped into upstream's version variables at start.
func Stamped() Info { return stamped }
