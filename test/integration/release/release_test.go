package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The platforms the suite releases for: RELEASE_TEST_PLATFORMS (space-separated, `make release`'s
// form), or this machine's alone, since a cross-compiled platform costs a full cold build of the
// manager and the plugin (hack/ociimage's tests cover a multi-platform index). The binaries of this
// machine's platform are run.
var (
	platforms = releasePlatforms(os.Getenv("RELEASE_TEST_PLATFORMS"))
	platform  = runtime.GOOS + "-" + runtime.GOARCH
)

func releasePlatforms(env string) []string {
	if p := strings.Fields(env); len(p) > 0 {
		return p
	}
	return []string{runtime.GOOS + "/" + runtime.GOARCH}
}

var _ = ginkgo.Describe("make release", ginkgo.Ordered, func() {
	var src, out, version, chartVersion, commit string
	var commitTime time.Time

	ginkgo.BeforeAll(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		// A clone holds HEAD and nothing else, as the release requires; it shares bin/, where the
		// tools are cached.
		src = filepath.Join(ginkgo.GinkgoT().TempDir(), "src")
		command(root, "git", "clone", "--quiet", "--shared", root, src)
		gomega.Expect(os.Symlink(filepath.Join(root, "bin"), filepath.Join(src, "bin"))).To(gomega.Succeed())
		commit = strings.TrimSpace(command(src, "git", "rev-parse", "HEAD"))
		commitTime, err = time.Parse(time.RFC3339, strings.TrimSpace(command(src, "git", "show", "-s", "--format=%cI", "HEAD")))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(platforms).To(gomega.ContainElement(runtime.GOOS+"/"+runtime.GOARCH), "the release test runs the binaries of this machine's platform")

		var chart struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		raw, err := os.ReadFile(filepath.Join(src, "charts", "kueue-timeshare", "Chart.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(yaml.Unmarshal(raw, &chart)).To(gomega.Succeed())
		version, chartVersion = chart.AppVersion, chart.Version

		command(src, "make", "release", "RELEASE_PLATFORMS="+strings.Join(platforms, " "), "RELEASE_URL=https://downloads.example.com/kueue-timeshare/"+version)
		out = filepath.Join(src, "dist", "release-"+version)
	})

	ginkgo.It("writes the image, the image context, the chart, manifests.yaml, the dashboard, the rules, the binaries and the krew manifest, with their checksums", func() {
		entries, err := os.ReadDir(out)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := []string{
			"SHA256SUMS",
			"kueue-timeshare-" + chartVersion + ".tgz",
			"kueue-timeshare-" + version + "-image-context.tar.gz",
			"kueue-timeshare-" + version + "-image-index.json",
			"kueue-timeshare-" + version + "-image.oci.tar",
			"kueue-timeshare-grafana-dashboard.json",
			"kueue-timeshare-prometheus-rules.yaml",
			"manifests.yaml",
			"plugin.yaml",
		}
		for _, p := range platforms {
			p = strings.Replace(p, "/", "-", 1)
			want = append(want, "kueue-timeshare-"+p, "kubectl-timeshare-"+p, "kubectl-timeshare-"+p+".tar.gz")
		}
		slices.Sort(want)
		gomega.Expect(cmp.Diff(want, names)).To(gomega.BeEmpty())

		ginkgo.By("listing every other file in SHA256SUMS with its digest")
		sums := map[string]string{}
		f, err := os.Open(filepath.Join(out, "SHA256SUMS"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		defer f.Close()
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			digest, name, ok := strings.Cut(lines.Text(), "  ")
			gomega.Expect(ok).To(gomega.BeTrue(), "a sha256sum line: %q", lines.Text())
			sums[name] = digest
		}
		computed := map[string]string{}
		for _, n := range names {
			if n == "SHA256SUMS" {
				continue
			}
			content, err := os.ReadFile(filepath.Join(out, n))
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			d := sha256.Sum256(content)
			computed[n] = hex.EncodeToString(d[:])
		}
		gomega.Expect(cmp.Diff(computed, sums)).To(gomega.BeEmpty())
	})

	ginkgo.It("puts HEAD's sources in the image context, and no build outputs", func() {
		files := tarFiles(filepath.Join(out, "kueue-timeshare-"+version+"-image-context.tar.gz"))
		for _, f := range []string{"Dockerfile", "go.mod", "go.sum", "LICENSE", "cmd/kueue-timeshare/main.go", "cmd/kubectl-timeshare/main.go"} {
			gomega.Expect(files).To(gomega.HaveKey(f))
		}
		for f := range files {
			gomega.Expect(f).NotTo(gomega.Or(gomega.HavePrefix("bin/"), gomega.HavePrefix("dist/"), gomega.HavePrefix("test/"), gomega.HavePrefix(".local/")))
		}
		head := command(src, "git", "show", "HEAD:Dockerfile")
		gomega.Expect(string(files["Dockerfile"])).To(gomega.Equal(head))
	})

	ginkgo.It("packages the chart with its version and the generated CRDs, which carry our fields", func() {
		files := tarFiles(filepath.Join(out, "kueue-timeshare-"+chartVersion+".tgz"))
		gomega.Expect(files).To(gomega.HaveKey("kueue-timeshare/Chart.yaml"))
		gomega.Expect(string(files["kueue-timeshare/Chart.yaml"])).To(gomega.ContainSubstring("version: " + chartVersion))
		var crd []byte
		for name, content := range files {
			if strings.HasPrefix(name, "kueue-timeshare/generated/crd/") && strings.Contains(name, "clusterqueues") {
				crd = content
			}
		}
		gomega.Expect(crd).NotTo(gomega.BeNil(), "the ClusterQueue CRD is in the chart")
		gomega.Expect(string(crd)).To(gomega.ContainSubstring("minAdmitDuration"))
	})

	ginkgo.It("writes manifests.yaml with the CRDs and the manager's Deployment", func() {
		content, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		kinds := map[string][]string{}
		docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(content), 4096)
		for {
			var u unstructured.Unstructured
			err := docs.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			if u.Object != nil {
				kinds[u.GetKind()] = append(kinds[u.GetKind()], u.GetName())
			}
		}
		gomega.Expect(kinds["CustomResourceDefinition"]).To(gomega.ContainElements("clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"))
		gomega.Expect(kinds["Deployment"]).To(gomega.HaveLen(1))
	})

	ginkgo.It("builds binaries that report the release's version, the Kueue version and the commit", func() {
		got := command(out, filepath.Join(out, "kueue-timeshare-"+platform), "--version")
		gomega.Expect(got).To(gomega.HavePrefix("kueue-timeshare " + version + " (Kueue v0.19.2, commit " + commit + ","))
		got = command(out, filepath.Join(out, "kubectl-timeshare-"+platform), "version")
		gomega.Expect(got).To(gomega.HavePrefix("kubectl-timeshare " + version + " (Kueue v0.19.2, commit " + commit + ","))
	})

	ginkgo.It("writes an OCI image index, an image per platform: static binaries, a non-root user, no shell, labels, every timestamp the commit's", func() {
		layout := readTar(filepath.Join(out, "kueue-timeshare-"+version+"-image.oci.tar"), false)
		gomega.Expect(string(layout["oci-layout"].data)).To(gomega.MatchJSON(`{"imageLayoutVersion": "1.0.0"}`))
		for name, e := range layout {
			gomega.Expect(e.header.ModTime.Equal(commitTime)).To(gomega.BeTrue(), "%s: time %s, want the commit's %s", name, e.header.ModTime, commitTime)
		}
		var top ociIndex
		gomega.Expect(json.Unmarshal(layout["index.json"].data, &top)).To(gomega.Succeed())
		gomega.Expect(top.Manifests).To(gomega.HaveLen(1))
		gomega.Expect(top.Manifests[0].MediaType).To(gomega.Equal("application/vnd.oci.image.index.v1+json"))
		gomega.Expect(top.Manifests[0].Annotations).To(gomega.HaveKeyWithValue("org.opencontainers.image.ref.name", version))

		ginkgo.By("listing the image digest, the SHA-256 of the image index shipped beside the archive, in SHA256SUMS")
		digest := top.Manifests[0].Digest
		index := blob(layout, digest)
		shipped, err := os.ReadFile(filepath.Join(out, "kueue-timeshare-"+version+"-image-index.json"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(shipped).To(gomega.Equal(index))
		gomega.Expect(sums(out)).To(gomega.HaveKeyWithValue("kueue-timeshare-"+version+"-image-index.json", strings.TrimPrefix(digest, "sha256:")))

		var images ociIndex
		gomega.Expect(json.Unmarshal(index, &images)).To(gomega.Succeed())
		var got []string
		for _, m := range images.Manifests {
			p := m.Platform.OS + "/" + m.Platform.Architecture
			got = append(got, p)
			ginkgo.By("reading the " + p + " image")
			var manifest struct {
				Config ociDescriptor   `json:"config"`
				Layers []ociDescriptor `json:"layers"`
			}
			gomega.Expect(json.Unmarshal(blob(layout, m.Digest), &manifest)).To(gomega.Succeed())
			var config struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
				Created      time.Time
				Config       struct {
					User       string            `json:"User"`
					Entrypoint []string          `json:"Entrypoint"`
					Cmd        []string          `json:"Cmd"`
					Labels     map[string]string `json:"Labels"`
				} `json:"config"`
			}
			gomega.Expect(json.Unmarshal(blob(layout, manifest.Config.Digest), &config)).To(gomega.Succeed())
			gomega.Expect(config.OS + "/" + config.Architecture).To(gomega.Equal(p))
			gomega.Expect(config.Created.Equal(commitTime)).To(gomega.BeTrue())
			gomega.Expect(config.Config.User).To(gomega.Equal("65532:65532"))
			gomega.Expect(config.Config.Entrypoint).To(gomega.Equal([]string{"/kueue-timeshare"}))
			gomega.Expect(config.Config.Cmd).To(gomega.BeEmpty())
			gomega.Expect(config.Config.Labels).To(gomega.And(
				gomega.HaveKeyWithValue("org.opencontainers.image.version", version),
				gomega.HaveKeyWithValue("org.opencontainers.image.revision", commit),
				gomega.HaveKeyWithValue("kueue-timeshare.io/kueue-version", "v0.19.2")))

			gomega.Expect(manifest.Layers).To(gomega.HaveLen(1))
			layer := filepath.Join(ginkgo.GinkgoT().TempDir(), "layer.tar.gz")
			gomega.Expect(os.WriteFile(layer, blob(layout, manifest.Layers[0].Digest), 0o600)).To(gomega.Succeed())
			files := readTar(layer, true)
			var names []string
			for name, e := range files {
				names = append(names, name)
				gomega.Expect(e.header.Uid).To(gomega.BeZero(), name)
				gomega.Expect(e.header.Gid).To(gomega.BeZero(), name)
			}
			gomega.Expect(names).To(gomega.ConsistOf("etc/", "etc/group", "etc/passwd", "kubectl-timeshare", "kueue-timeshare", "tmp/"), "no shell, nothing else")
			gomega.Expect(string(files["etc/passwd"].data)).To(gomega.ContainSubstring("nonroot:x:65532:65532:"))
			gomega.Expect(files["kueue-timeshare"].header.Mode).To(gomega.Equal(int64(0o755)))

			ginkgo.By("checking the " + p + " manager is a static executable for " + p)
			bin := filepath.Join(ginkgo.GinkgoT().TempDir(), "kueue-timeshare")
			gomega.Expect(os.WriteFile(bin, files["kueue-timeshare"].data, 0o755)).To(gomega.Succeed())
			exe, err := elf.Open(bin)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(exe.Machine).To(gomega.Equal(map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[m.Platform.Architecture]))
			gomega.Expect(exe.Progs).NotTo(gomega.ContainElement(gomega.HaveField("Type", elf.PT_INTERP)), "no dynamic loader")
			gomega.Expect(exe.Close()).To(gomega.Succeed())
			if p == runtime.GOOS+"/"+runtime.GOARCH {
				ginkgo.By("running the manager of this machine's platform from the image")
				got := command(out, bin, "--version")
				gomega.Expect(got).To(gomega.HavePrefix("kueue-timeshare " + version + " (Kueue v0.19.2, commit " + commit + ","))
			}
		}
		gomega.Expect(got).To(gomega.Equal(platforms))
	})

	ginkgo.It("pins the image digest in the packaged chart's values; the repository's chart has none", func() {
		index, err := os.ReadFile(filepath.Join(out, "kueue-timeshare-"+version+"-image-index.json"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		d := sha256.Sum256(index)
		var values struct {
			Image struct {
				Repository string `json:"repository"`
				Digest     string `json:"digest"`
			} `json:"image"`
		}
		files := tarFiles(filepath.Join(out, "kueue-timeshare-"+chartVersion+".tgz"))
		gomega.Expect(yaml.Unmarshal(files["kueue-timeshare/values.yaml"], &values)).To(gomega.Succeed())
		gomega.Expect(values.Image.Digest).To(gomega.Equal("sha256:" + hex.EncodeToString(d[:])))
		gomega.Expect(yaml.Unmarshal([]byte(command(src, "git", "show", "HEAD:charts/kueue-timeshare/values.yaml")), &values)).To(gomega.Succeed())
		gomega.Expect(values.Image.Digest).To(gomega.BeEmpty())
	})

	ginkgo.It("ships the chart's dashboard and alerting rules as files of their own", func() {
		for release, chartFile := range map[string]string{
			"kueue-timeshare-grafana-dashboard.json": "charts/kueue-timeshare/files/grafana-dashboard.json",
			"kueue-timeshare-prometheus-rules.yaml":  "charts/kueue-timeshare/files/prometheus-rules.yaml",
		} {
			got, err := os.ReadFile(filepath.Join(out, release))
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(string(got)).To(gomega.Equal(command(src, "git", "show", "HEAD:"+chartFile)), release)
			files := tarFiles(filepath.Join(out, "kueue-timeshare-"+chartVersion+".tgz"))
			gomega.Expect(string(files["kueue-timeshare/files/"+filepath.Base(chartFile)])).To(gomega.Equal(string(got)), "the packaged chart's copy")
		}
	})

	ginkgo.It("writes a krew manifest whose per-platform archives match their sha256 and hold a plugin that reports its version", func() {
		raw, err := os.ReadFile(filepath.Join(out, "plugin.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var plugin struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Version          string `json:"version"`
				Homepage         string `json:"homepage"`
				ShortDescription string `json:"shortDescription"`
				Description      string `json:"description"`
				Platforms        []struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					} `json:"selector"`
					URI    string `json:"uri"`
					SHA256 string `json:"sha256"`
					Bin    string `json:"bin"`
					Files  []struct {
						From string `json:"from"`
						To   string `json:"to"`
					} `json:"files"`
				} `json:"platforms"`
			} `json:"spec"`
		}
		gomega.Expect(yaml.UnmarshalStrict(raw, &plugin)).To(gomega.Succeed())
		gomega.Expect(plugin.APIVersion).To(gomega.Equal("krew.googlecontainertools.github.com/v1alpha2"))
		gomega.Expect(plugin.Kind).To(gomega.Equal("Plugin"))
		gomega.Expect(plugin.Metadata.Name).To(gomega.Equal("timeshare"), "kubectl timeshare")
		gomega.Expect(plugin.Spec.Version).To(gomega.Equal(version))
		gomega.Expect(plugin.Spec.ShortDescription).NotTo(gomega.BeEmpty())
		gomega.Expect(plugin.Spec.Description).NotTo(gomega.BeEmpty())
		var got []string
		for _, p := range plugin.Spec.Platforms {
			goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
			got = append(got, goos+"/"+arch)
			archive := "kubectl-timeshare-" + goos + "-" + arch + ".tar.gz"
			gomega.Expect(p.URI).To(gomega.Equal("https://downloads.example.com/kueue-timeshare/" + version + "/" + archive))
			gomega.Expect(sums(out)).To(gomega.HaveKeyWithValue(archive, p.SHA256))
			files := readTar(filepath.Join(out, archive), true)
			gomega.Expect(files).To(gomega.HaveKey(p.Bin))
			gomega.Expect(files[p.Bin].header.Mode&0o111).NotTo(gomega.BeZero(), "executable")
			for _, f := range p.Files {
				gomega.Expect(files).To(gomega.HaveKey(f.From))
			}
			if goos+"-"+arch == platform {
				bin := filepath.Join(ginkgo.GinkgoT().TempDir(), "kubectl-timeshare")
				gomega.Expect(os.WriteFile(bin, files[p.Bin].data, 0o755)).To(gomega.Succeed())
				gomega.Expect(command(out, bin, "version")).To(gomega.HavePrefix("kubectl-timeshare " + version + " (Kueue v0.19.2, commit " + commit + ","))
			}
		}
		gomega.Expect(got).To(gomega.Equal(platforms))
	})

	ginkgo.It("gives the same image, to the digest, when make image builds the commit again", func() {
		command(src, "make", "image", "RELEASE_PLATFORMS="+strings.Join(platforms, " "))
		again := filepath.Join(src, "dist", "image-"+version)
		for _, name := range []string{"kueue-timeshare-" + version + "-image-index.json", "kueue-timeshare-" + version + "-image.oci.tar"} {
			first, err := os.ReadFile(filepath.Join(out, name))
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			second, err := os.ReadFile(filepath.Join(again, name))
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(sha256.Sum256(second)).To(gomega.Equal(sha256.Sum256(first)), name)
		}
	})

	ginkgo.It("refuses a work tree with uncommitted changes", func() {
		readme := filepath.Join(src, "README.md")
		f, err := os.OpenFile(readme, os.O_APPEND|os.O_WRONLY, 0)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = f.WriteString("\nnot committed\n")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(f.Close()).To(gomega.Succeed())
		before, err := os.Stat(filepath.Join(out, "SHA256SUMS"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())

		cmd := exec.Command(filepath.Join(src, "hack", "release.sh"), version, chartVersion, runtime.GOOS+"/"+runtime.GOARCH)
		cmd.Dir = src
		output, err := cmd.CombinedOutput()
		gomega.Expect(err).To(gomega.HaveOccurred(), string(output))
		gomega.Expect(string(output)).To(gomega.ContainSubstring("the work tree has uncommitted changes; a release is built from commits only"))
		after, err := os.Stat(filepath.Join(out, "SHA256SUMS"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "the last release is left as it was")
		gomega.Expect(after.ModTime()).To(gomega.Equal(before.ModTime()))
	})
})

// command runs name in dir and returns its standard output, failing the spec with its output when
// it fails. Make's variables from a calling make are dropped: this is a make of its own.
func command(dir, name string, args ...string) string {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	ginkgo.GinkgoWriter.Printf("%s %s: %s\n", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s:\n%s\n%s", name, strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

// sums reads SHA256SUMS in dir: file name to hex digest.
func sums(dir string) map[string]string {
	ginkgo.GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		digest, name, ok := strings.Cut(line, "  ")
		gomega.Expect(ok).To(gomega.BeTrue(), "a sha256sum line: %q", line)
		out[name] = digest
	}
	return out
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	Manifests []ociDescriptor `json:"manifests"`
}

// blob returns the blob of an OCI layout read by readTar, checking it against its digest.
func blob(layout map[string]tarEntry, digest string) []byte {
	ginkgo.GinkgoHelper()
	e, ok := layout["blobs/"+strings.Replace(digest, ":", "/", 1)]
	gomega.Expect(ok).To(gomega.BeTrue(), "blob %s is in the layout", digest)
	d := sha256.Sum256(e.data)
	gomega.Expect("sha256:" + hex.EncodeToString(d[:])).To(gomega.Equal(digest))
	return e.data
}

type tarEntry struct {
	header *tar.Header
	data   []byte
}

// readTar reads every entry of a tar archive, gzipped or not, by name.
func readTar(path string, gzipped bool) map[string]tarEntry {
	ginkgo.GinkgoHelper()
	f, err := os.Open(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	var in io.Reader = f
	if gzipped {
		gz, err := gzip.NewReader(f)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		in = gz
	}
	r := tar.NewReader(in)
	out := map[string]tarEntry{}
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		data, err := io.ReadAll(r)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		out[h.Name] = tarEntry{h, data}
	}
}

// tarFiles reads a gzipped tar archive's regular files.
func tarFiles(path string) map[string][]byte {
	ginkgo.GinkgoHelper()
	f, err := os.Open(path)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	gz, err := gzip.NewReader(f)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	r := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		if h.Typeflag != tar.TypeReg {
			continue
		}
		content, err := io.ReadAll(r)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		files[h.Name] = content
	}
}
