package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGates(t *testing.T) {
	cases := map[string]struct {
		list    string
		want    map[string]bool
		wantErr bool
	}{
		"empty":         {list: "", want: map[string]bool{}},
		"two":           {list: "WorkloadRequestUseMergePatch=true, TopologyAwareScheduling=false", want: map[string]bool{"WorkloadRequestUseMergePatch": true, "TopologyAwareScheduling": false}},
		"trailing":      {list: "A=true,", want: map[string]bool{"A": true}},
		"no value":      {list: "A", wantErr: true},
		"not a boolean": {list: "A=yes", wantErr: true},
		"no name":       {list: "=true", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseGates(tc.list)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseGates(%q) error %v, want error %v", tc.list, err, tc.wantErr)
			}
			if !tc.wantErr {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("parseGates(%q) (-want +got):\n%s", tc.list, diff)
				}
			}
		})
	}
}

// apiServerCPU finds this process's kube-apiserver child by its command name, and only while it
// runs: a copy of sleep named kube-apiserver stands in for envtest's.
func TestAPIServerCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	if cpu, ok := apiServerCPU(); ok {
		t.Fatalf("apiServerCPU() = %s, true before any child runs", cpu)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command here")
	}
	raw, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.WriteFile(fake, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, ok := apiServerCPU(); !ok {
		t.Errorf("apiServerCPU() found no kube-apiserver child while one runs (pid %d)", cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if cpu, ok := apiServerCPU(); ok {
		t.Errorf("apiServerCPU() = %s, true after the child ended", cpu)
	}
}
