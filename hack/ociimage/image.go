package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless's "nonroot", so that the chart's runAsNonRoot and any policy
// written for the distroless image hold.
const (
	uid        = 65532
	entrypoint = "/kueue-timeshare"
	// KueueVersionLabel is the config label that names the Kueue release the manager is built on.
	KueueVersionLabel = "kueue-timeshare.io/kueue-version"
)

// Binaries are the files each platform's image holds at its root, read from BinDir as
// <name>-<os>-<arch>. The plugin rides along as in the Dockerfile's image.
var Binaries = []string{"kueue-timeshare", "kubectl-timeshare"}

// Options say what to build.
type Options struct {
	BinDir       string
	Platforms    []string // os/arch
	Version      string
	KueueVersion string
	Commit       string
	// Created is every timestamp in the image and the archive: with the commit's time, the same
	// commit gives the same digest.
	Created time.Time
}

// Result is the archive, its image index and the index's digest (the image digest).
type Result struct {
	Archive []byte
	Index   []byte
	Digest  string
}

// Build writes the image index of one image per platform into an OCI image layout and tars it.
func Build(o Options) (*Result, error) {
	created := o.Created.UTC().Truncate(time.Second)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.Annotations(idx, labels(o, created)).(v1.ImageIndex)
	for _, p := range o.Platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q is not os/arch", p)
		}
		img, err := platformImage(o, osName, arch, created)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return nil, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	// The tag skopeo's oci-archive:FILE:TAG reads, and the name docker load gives the image.
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
		"io.containerd.image.name":          "kueue-timeshare:" + o.Version,
	})); err != nil {
		return nil, err
	}
	archive, err := tarDir(dir, created)
	if err != nil {
		return nil, err
	}
	return &Result{Archive: archive, Index: raw, Digest: digest.String()}, nil
}

// labels are the image's OCI labels, on every platform's config and on the index.
func labels(o Options, created time.Time) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "kueue-timeshare",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Commit,
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
		KueueVersionLabel:                   o.KueueVersion,
	}
}

func platformImage(o Options, osName, arch string, created time.Time) (v1.Image, error) {
	files := []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid))},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid))},
		// Writable scratch space: Go's os.TempDir, and the mount point of the chart's volumes.
		{name: "tmp/", mode: 0o1777},
	}
	for _, b := range Binaries {
		data, err := os.ReadFile(filepath.Join(o.BinDir, b+"-"+osName+"-"+arch))
		if err != nil {
			return nil, err
		}
		files = append(files, file{name: b, mode: 0o755, data: data})
	}
	layerTar, err := tarFiles(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/ociimage: " + strings.Join(Binaries, ", ") + ", /etc/passwd, /etc/group, /tmp",
			Comment:   "static binaries built with CGO_ENABLED=0 -trimpath",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{entrypoint},
		WorkingDir: "/",
		Labels:     labels(o, created),
	}
	return mutate.ConfigFile(img, cf)
}

// file is one entry of a tar archive; a name ending in / is a directory.
type file struct {
	name string
	mode int64
	data []byte
}

// tarFiles writes files sorted by name, owned by root, with the given modes and time only, so
// that the archive depends on the contents alone.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Format: tar.FormatUSTAR}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir archives the layout written under dir the same way.
func tarDir(dir string, mtime time.Time) ([]byte, error) {
	var files []file
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			files = append(files, file{name: rel + "/", mode: 0o755})
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, file{name: rel, mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tarFiles(files, mtime)
}
