package main

import (
	"os"
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

// The figure comes from /proc: where there is none the run reports no API server CPU.
func TestAPIServerCPUWithoutChild(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	if cpu, ok := apiServerCPU(); ok {
		t.Errorf("apiServerCPU() = %s, true; the test process has no kube-apiserver child", cpu)
	}
}
