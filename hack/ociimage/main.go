// Command ociimage writes the manager's multi-platform image as an OCI image layout archive from
// binaries already built, without a container engine:
//
//	ociimage -bin-dir DIR -platforms "linux/amd64 linux/arm64" -version v0.1.0 -kueue-version v0.19.2 \
//	  -commit SHA -created 2026-11-26T12:00:00Z -out IMAGE.oci.tar [-index-out INDEX.json]
//
// DIR holds kueue-timeshare-<os>-<arch> and kubectl-timeshare-<os>-<arch> for each platform (as
// `make release` names them). It prints the image's digest: the SHA-256 of the image index, which
// -index-out receives byte for byte. The same inputs give the same archive, byte for byte.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var (
		o         Options
		platforms string
		created   string
		out       string
		indexOut  string
	)
	flag.StringVar(&o.BinDir, "bin-dir", "", "directory of the binaries, named <name>-<os>-<arch>")
	flag.StringVar(&platforms, "platforms", "linux/amd64 linux/arm64", "space-separated os/arch list")
	flag.StringVar(&o.Version, "version", "", "kueue-timeshare's version (label and tag)")
	flag.StringVar(&o.KueueVersion, "kueue-version", "", "the Kueue release the manager is built on (label)")
	flag.StringVar(&o.Commit, "commit", "", "the commit built (label)")
	flag.StringVar(&created, "created", "", "RFC 3339 time of every timestamp in the image, e.g. the commit's")
	flag.StringVar(&out, "out", "", "the OCI image layout archive to write")
	flag.StringVar(&indexOut, "index-out", "", "where to write the image index (its SHA-256 is the image digest)")
	flag.Parse()

	o.Platforms = strings.Fields(platforms)
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fail(fmt.Errorf("-created: %w", err))
	}
	o.Created = t
	if o.BinDir == "" || o.Version == "" || o.KueueVersion == "" || o.Commit == "" || out == "" || len(o.Platforms) == 0 {
		fail(fmt.Errorf("-bin-dir, -platforms, -version, -kueue-version, -commit, -created and -out are required"))
	}
	res, err := Build(o)
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(out, res.Archive, 0o644); err != nil {
		fail(err)
	}
	if indexOut != "" {
		if err := os.WriteFile(indexOut, res.Index, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Println(res.Digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}
