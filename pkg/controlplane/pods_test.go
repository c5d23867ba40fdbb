package controlplane

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseNodeShape(t *testing.T) {
	cases := map[string]struct {
		count            int
		cpu, memory, gpu string
		want             NodeShape
		wantErr          string
	}{
		"defaults":      {count: 4, cpu: "8", memory: "32Gi", gpu: "8", want: DefaultNodes()},
		"no GPUs":       {count: 1, cpu: "500m", memory: "1Gi", gpu: "0", want: NodeShape{Count: 1, CPU: resource.MustParse("500m"), Memory: resource.MustParse("1Gi"), GPU: resource.MustParse("0")}},
		"no nodes":      {count: 0, cpu: "8", memory: "32Gi", gpu: "8", wantErr: "nodes: 0: at least one Node is needed"},
		"bad cpu":       {count: 2, cpu: "eight", memory: "32Gi", gpu: "8", wantErr: `node CPU: "eight" is not a quantity`},
		"zero memory":   {count: 2, cpu: "8", memory: "0", gpu: "8", wantErr: "node memory: 0: must be positive"},
		"negative GPUs": {count: 2, cpu: "8", memory: "1Gi", gpu: "-1", wantErr: "node GPUs: -1: must not be negative"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNodeShape(tc.count, tc.cpu, tc.memory, tc.gpu)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("shape (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimulatedNode(t *testing.T) {
	cases := map[string]struct {
		shape   NodeShape
		wantGPU bool
	}{
		"with GPUs":    {shape: DefaultNodes(), wantGPU: true},
		"without GPUs": {shape: NodeShape{Count: 1, CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := simulatedNode("node-1", tc.shape)
			if len(n.Spec.Taints) != 0 {
				t.Errorf("taints = %v, want none", n.Spec.Taints)
			}
			if got := n.Status.Capacity.Cpu(); got.Cmp(tc.shape.CPU) != 0 {
				t.Errorf("cpu = %s, want %s", got, tc.shape.CPU.String())
			}
			if _, ok := n.Status.Allocatable[GPUResource]; ok != tc.wantGPU {
				t.Errorf("allocatable has %s: %t, want %t", GPUResource, ok, tc.wantGPU)
			}
		})
	}
}
