package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReport(t *testing.T) {
	const stream = `{"config":{"scanner_name":"govulncheck"}}
{"osv":{"id":"GO-1"}}
{"finding":{"osv":"GO-1","fixed_version":"v1.2.0","trace":[{"module":"example.test/a","version":"v1.1.0"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.2.0","trace":[{"module":"example.test/a","version":"v1.1.0","package":"example.test/a/p","function":"F"},{"module":"ours","function":"main"}]}}
{"finding":{"osv":"GO-2","trace":[{"module":"example.test/b","version":"v0.1.0","package":"example.test/b"}]}}
{"finding":{"osv":"GO-3","trace":[{"module":"example.test/c","version":"v2.0.0"}]}}
{"finding":{"osv":"GO-4","trace":[{"module":"example.test/d","version":"v1.0.0","package":"example.test/d","function":"G"}]}}
`
	cases := map[string]struct {
		accepted       string
		wantUnaccepted []string
		wantErr        string
	}{
		"nothing accepted: the called ones fail": {
			wantUnaccepted: []string{"GO-1", "GO-4"},
		},
		"an accepted called vulnerability passes": {
			accepted:       "# why each is accepted: docs\nGO-4 not reachable: only kubelet code\n",
			wantUnaccepted: []string{"GO-1"},
		},
		"imported or required only never fail": {
			accepted: "GO-1 r\nGO-4 r\n",
		},
		"an acceptance without a reason is refused": {
			accepted: "GO-4\n",
			wantErr:  "line 1: GO-4 has no reason",
		},
	}
	vulns, err := Read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := []Vuln{
		{ID: "GO-1", Module: "example.test/a", Version: "v1.1.0", Fixed: "v1.2.0", Level: Called},
		{ID: "GO-2", Module: "example.test/b", Version: "v0.1.0", Level: Imported},
		{ID: "GO-3", Module: "example.test/c", Version: "v2.0.0", Level: Required},
		{ID: "GO-4", Module: "example.test/d", Version: "v1.0.0", Level: Called},
	}
	if diff := cmp.Diff(want, vulns); diff != "" {
		t.Fatalf("Read (-want +got):\n%s", diff)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			accepted, err := ReadAccepted(strings.NewReader(tc.accepted))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadAccepted error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range Unaccepted(vulns, accepted) {
				got = append(got, v.ID)
			}
			if diff := cmp.Diff(tc.wantUnaccepted, got); diff != "" {
				t.Errorf("Unaccepted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRejectsGarbage(t *testing.T) {
	if _, err := Read(strings.NewReader(`{"finding": [`)); err == nil {
		t.Fatal("want an error for a truncated stream")
	}
}
