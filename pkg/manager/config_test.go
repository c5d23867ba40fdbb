package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
)

// Feature gates are process-wide, so the cases that set them run the binary instead
// (cmd/kueue-timeshare).
func TestLoadConfig(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file    string   // empty: no --config
		wantErr []string // substrings of the error; nil means success
		check   func(t *testing.T, cfg configapi.Configuration)
	}{
		"defaults without a file": {
			check: func(t *testing.T, cfg configapi.Configuration) {
				if diff := cmp.Diff(ptr.To(9443), cfg.Webhook.Port); diff != "" {
					t.Errorf("webhook port (-want +got):\n%s", diff)
				}
				if !internalCertsEnabled(&cfg) {
					t.Error("internal certificate management should be on by default")
				}
			},
		},
		"file values override defaults": {
			file: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
webhook:
  port: 9555
internalCertManagement:
  enable: false
`,
			check: func(t *testing.T, cfg configapi.Configuration) {
				if diff := cmp.Diff(ptr.To(9555), cfg.Webhook.Port); diff != "" {
					t.Errorf("webhook port (-want +got):\n%s", diff)
				}
				if internalCertsEnabled(&cfg) {
					t.Error("internal certificate management should be off")
				}
			},
		},
		"missing file names the path": {
			file:    "\x00missing",
			wantErr: []string{"loading configuration file", "does-not-exist.yaml"},
		},
		"malformed YAML": {
			file:    "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwebhook: [",
			wantErr: []string{"loading configuration file"},
		},
		"invalid value names the field": {
			file: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: ["not-a-framework"]
`,
			wantErr: []string{"invalid configuration", "integrations.frameworks"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Gates are process-wide: put back what this case changed.

			path := ""
			switch {
			case tc.file == "\x00missing":
				path = filepath.Join(t.TempDir(), "does-not-exist.yaml")
			case tc.file != "":
				path = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, cfg, err := LoadConfig(scheme, path, "")
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("expected an error containing %q", tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tc.check(t, cfg)
		})
	}
}
