package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times on Linux.
const clockTicks = 100

// apiServerCPU reads the CPU time (user and system) of this process's kube-apiserver child, which
// envtest started; false where there is none or no /proc.
func apiServerCPU() (time.Duration, bool) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: the fields after the command's closing parenthesis.
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "kube-apiserver" {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self || pid == self {
			continue
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		return time.Duration(utime+stime) * time.Second / clockTicks, true
	}
	return 0, false
}

// apiServerGet streams the API server's answer to a GET of path; an answer other than 2xx is an
// error.
func apiServerGet(ctx context.Context, cfg *rest.Config, path string, params map[string]string) (io.ReadCloser, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	req := cs.Discovery().RESTClient().Get().AbsPath(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	return req.Stream(ctx)
}

// profileAPIServer writes a CPU profile of the API server over d to path, through its
// /debug/pprof endpoint (on by default in kube-apiserver).
func profileAPIServer(ctx context.Context, cfg *rest.Config, d time.Duration, path string) error {
	body, err := apiServerGet(ctx, cfg, "/debug/pprof/profile", map[string]string{"seconds": strconv.Itoa(int(d.Seconds()))})
	if err != nil {
		return fmt.Errorf("API server profile: %w", err)
	}
	defer body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// apiServerRequests reads the API server's apiserver_request_total and sums it by
// "<verb> <resource>[/<subresource>]", over every client of the control plane.
func apiServerRequests(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	body, err := apiServerGet(ctx, cfg, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["resource"] == "" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += int(m.GetCounter().GetValue())
	}
	return out, nil
}
