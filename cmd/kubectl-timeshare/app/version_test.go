package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/version"
)

// `kubectl timeshare version` needs no cluster and prints what the manager's --version prints,
// under the plugin's name.
func TestVersionCommand(t *testing.T) {
	cases := map[string]struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		"version":     {args: []string{"version"}, wantOut: "kubectl-timeshare " + version.Version + " (Kueue " + version.KueueVersion + ", commit "},
		"an argument": {args: []string{"version", "extra"}, wantCode: 1, wantErr: `unknown command "extra" for "kubectl-timeshare version"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(context.Background(), tc.args, Streams{Out: &out, ErrOut: &errOut}, Options{})
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tc.wantCode, errOut.String())
			}
			if !strings.HasPrefix(out.String(), tc.wantOut) || strings.Count(out.String(), "\n") != min(1, len(tc.wantOut)) {
				t.Errorf("output %q, want one line starting %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.wantErr)
			}
		})
	}
}
