package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var created = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// options writes fake binaries whose contents name their platform into a new directory.
func options(t *testing.T, platforms ...string) Options {
	dir := t.TempDir()
	for _, p := range platforms {
		for _, b := range Binaries {
			name := b + "-" + strings.Replace(p, "/", "-", 1)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b+" for "+p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return Options{BinDir: dir, Platforms: platforms, Version: "v0.1.0", KueueVersion: "v0.19.2", Commit: "abc123", Created: created}
}

func TestBuildIsReproducible(t *testing.T) {
	base := options(t, "linux/amd64", "linux/arm64")
	first, err := Build(base)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		change   func(*Options)
		sameHash bool
	}{
		"the same inputs":          {change: func(*Options) {}, sameHash: true},
		"the same inputs, later":   {change: func(o *Options) { o.Created = created.Add(500 * time.Millisecond) }, sameHash: true},
		"another commit":           {change: func(o *Options) { o.Commit = "def456" }},
		"another time":             {change: func(o *Options) { o.Created = created.Add(time.Hour) }},
		"another set of platforms": {change: func(o *Options) { o.Platforms = o.Platforms[:1] }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base
			tc.change(&o)
			got, err := Build(o)
			if err != nil {
				t.Fatal(err)
			}
			if (got.Digest == first.Digest) != tc.sameHash {
				t.Errorf("digest %s, first build %s; want equal: %v", got.Digest, first.Digest, tc.sameHash)
			}
			if tc.sameHash && !bytes.Equal(got.Archive, first.Archive) {
				t.Error("the same image gave another archive")
			}
		})
	}
}

func TestBuildReadsBack(t *testing.T) {
	o := options(t, "linux/amd64", "linux/arm64")
	res, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	untar(t, res.Archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(outer.Manifests) != 1 || outer.Manifests[0].Digest.String() != res.Digest {
		t.Fatalf("index.json lists %+v, want the image index %s", outer.Manifests, res.Digest)
	}
	if got := outer.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != "v0.1.0" {
		t.Errorf("ref.name %q, want the version", got)
	}
	images, err := idx.ImageIndex(outer.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := images.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(res.Index), string(raw)); diff != "" {
		t.Errorf("the index written beside the archive differs (-written +archived):\n%s", diff)
	}
	m, err := images.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := images.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		wantConfig := v1.Config{
			User: "65532:65532", Entrypoint: []string{"/kueue-timeshare"}, WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.title": "kueue-timeshare", "org.opencontainers.image.version": "v0.1.0",
				"org.opencontainers.image.revision": "abc123", "org.opencontainers.image.created": "2026-11-26T12:00:00Z",
				"org.opencontainers.image.licenses": "Apache-2.0", KueueVersionLabel: "v0.19.2",
			},
		}
		if diff := cmp.Diff(wantConfig, cf.Config); diff != "" {
			t.Errorf("%s config (-want +got):\n%s", d.Platform, diff)
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture || !cf.Created.Equal(created) {
			t.Errorf("%s config says %s/%s created %s", d.Platform, cf.OS, cf.Architecture, cf.Created)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", d.Platform, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got := entries(t, rc)
		p := d.Platform.OS + "/" + d.Platform.Architecture
		want := []entry{
			{"etc/", 0o755, 0, ""},
			{"etc/group", 0o644, 0, "root:x:0:\nnonroot:x:65532:\n"},
			{"etc/passwd", 0o644, 0, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
			{"kubectl-timeshare", 0o755, 0, "kubectl-timeshare for " + p},
			{"kueue-timeshare", 0o755, 0, "kueue-timeshare for " + p},
			{"tmp/", 0o1777, 0, ""},
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(entry{})); diff != "" {
			t.Errorf("%s layer (-want +got):\n%s", p, diff)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

func TestBuildFailsWithoutABinary(t *testing.T) {
	o := options(t, "linux/amd64")
	o.Platforms = append(o.Platforms, "linux/s390x")
	if _, err := Build(o); err == nil {
		t.Fatal("built an image for a platform without binaries")
	}
}

type entry struct {
	name string
	mode int64
	uid  int
	data string
}

func entries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(created) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: time %s, owner %d:%d; want %s, 0:0", h.Name, h.ModTime, h.Uid, h.Gid, created)
		}
		out = append(out, entry{h.Name, h.Mode, h.Uid, string(data)})
	}
}

func untar(t *testing.T, archive []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
