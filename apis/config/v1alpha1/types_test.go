package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestValidateHeadsPerCycle(t *testing.T) {
	cases := map[string]struct {
		section string
		want    []string
	}{
		"unset is the default, 1":  {section: `{}`},
		"the largest allowed":      {section: `{"headsPerCycle": 1000}`},
		"zero names the field":     {section: `{"headsPerCycle": 0}`, want: []string{"timeshare.headsPerCycle: Invalid value: 0: must be between 1 and 1000"}},
		"negative names the field": {section: `{"headsPerCycle": -3}`, want: []string{"timeshare.headsPerCycle: Invalid value: -3: must be between 1 and 1000"}},
		"too many names the field": {section: `{"headsPerCycle": 1001}`, want: []string{"timeshare.headsPerCycle: Invalid value: 1001: must be between 1 and 1000"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Decode([]byte(tc.section))
			if err != nil {
				t.Fatal(err)
			}
			SetDefaults(&c)
			var got []string
			for _, e := range Validate(&c) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
	var c Configuration
	SetDefaults(&c)
	if diff := cmp.Diff(ptr.To[int32](DefaultHeadsPerCycle), c.HeadsPerCycle); diff != "" {
		t.Errorf("default headsPerCycle (-want +got):\n%s", diff)
	}
}

func TestValidatePendingStatusWriters(t *testing.T) {
	cases := map[string]struct {
		section string
		want    []string
	}{
		"unset is the default":     {section: `{}`},
		"zero writes inline":       {section: `{"pendingStatusWriters": 0}`},
		"the largest allowed":      {section: `{"pendingStatusWriters": 64}`},
		"negative names the field": {section: `{"pendingStatusWriters": -1}`, want: []string{"timeshare.pendingStatusWriters: Invalid value: -1: must be between 0 and 64"}},
		"too many names the field": {section: `{"pendingStatusWriters": 65}`, want: []string{"timeshare.pendingStatusWriters: Invalid value: 65: must be between 0 and 64"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Decode([]byte(tc.section))
			if err != nil {
				t.Fatal(err)
			}
			SetDefaults(&c)
			var got []string
			for _, e := range Validate(&c) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
	var c Configuration
	SetDefaults(&c)
	if diff := cmp.Diff(ptr.To[int32](DefaultPendingStatusWriters), c.PendingStatusWriters); diff != "" {
		t.Errorf("default pendingStatusWriters (-want +got):\n%s", diff)
	}
}
