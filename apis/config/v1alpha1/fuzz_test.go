package v1alpha1

import (
	"strings"
	"testing"
)

// FuzzDecode: arbitrary sections never panic; a decoded and defaulted section either validates or
// fails naming a timeshare field.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"defaultPreemptMinRuntime":"5m","reclaimResolveMethod":"Queue"}`))
	f.Add([]byte(`{"defaultRequeueDelay":"-1s","reclaimResolveMethod":"Root"}`))
	f.Add([]byte(`{"unknown":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Decode(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), SectionKey+":") {
				t.Fatalf("error does not name the section: %v", err)
			}
			return
		}
		SetDefaults(&c)
		for _, e := range Validate(&c) {
			if !strings.HasPrefix(e.Field, SectionKey+".") {
				t.Fatalf("error outside the section: %v", e)
			}
		}
	})
}
