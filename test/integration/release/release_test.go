package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
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

// The release is built for this machine's platform only, so that its binaries can be run here.
var platform = runtime.GOOS + "-" + runtime.GOARCH

var _ = ginkgo.Describe("make release", ginkgo.Ordered, func() {
	var src, out, version, chartVersion, commit string

	ginkgo.BeforeAll(func() {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		// A clone holds HEAD and nothing else, as the release requires; it shares bin/, where the
		// tools are cached.
		src = filepath.Join(ginkgo.GinkgoT().TempDir(), "src")
		command(root, "git", "clone", "--quiet", "--shared", root, src)
		gomega.Expect(os.Symlink(filepath.Join(root, "bin"), filepath.Join(src, "bin"))).To(gomega.Succeed())
		commit = strings.TrimSpace(command(src, "git", "rev-parse", "HEAD"))

		var chart struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		raw, err := os.ReadFile(filepath.Join(src, "charts", "kueue-timeshare", "Chart.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(yaml.Unmarshal(raw, &chart)).To(gomega.Succeed())
		version, chartVersion = chart.AppVersion, chart.Version

		command(src, "make", "release", "RELEASE_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
		out = filepath.Join(src, "dist", "release-"+version)
	})

	ginkgo.It("writes the image context, the chart, manifests.yaml and the binaries, with their checksums", func() {
		entries, err := os.ReadDir(out)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := []string{
			"SHA256SUMS",
			"kubectl-timeshare-" + platform,
			"kueue-timeshare-" + chartVersion + ".tgz",
			"kueue-timeshare-" + platform,
			"kueue-timeshare-" + version + "-image-context.tar.gz",
			"manifests.yaml",
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
		help := command(out, filepath.Join(out, "kubectl-timeshare-"+platform), "--help")
		gomega.Expect(help).To(gomega.ContainSubstring("kubectl-timeshare [command]"))
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
