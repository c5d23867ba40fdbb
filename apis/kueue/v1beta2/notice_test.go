package v1beta2

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestNoticeFields(t *testing.T) {
	preemption := field.NewPath("spec", "preemption")
	const gateOff = "needs the gate"
	cases := map[string]struct {
		spec      string
		want      NoticeSettings
		wantParse string // the field the parse error must name
		wantErrs  field.ErrorList
		// wantInUse are the fields InUse reports.
		wantInUse []string
	}{
		"nothing set": {spec: `{"preemption":{"preemptMinRuntime":"1m"}}`},
		"every field set": {
			spec: `{"preemption":{"noticePeriod":"5m","noticeOnPriorityPreemption":true,"noticeOnReclaim":true}}`,
			want: NoticeSettings{NoticePeriod: &metav1.Duration{Duration: 5 * time.Minute},
				NoticeOnPriorityPreemption: ptr.To(true), NoticeOnReclaim: ptr.To(true)},
			wantInUse: []string{"spec.preemption.noticePeriod", "spec.preemption.noticeOnPriorityPreemption", "spec.preemption.noticeOnReclaim"},
		},
		"zero and false are kept, unlike unset, and ask for nothing": {
			spec: `{"preemption":{"noticePeriod":"0s","noticeOnReclaim":false}}`,
			want: NoticeSettings{NoticePeriod: &metav1.Duration{}, NoticeOnReclaim: ptr.To(false)},
		},
		"exactly the maximum": {
			spec:      `{"preemption":{"noticePeriod":"1h"}}`,
			want:      NoticeSettings{NoticePeriod: &metav1.Duration{Duration: time.Hour}},
			wantInUse: []string{"spec.preemption.noticePeriod"},
		},
		"over the maximum": {
			spec:      `{"preemption":{"noticePeriod":"61m"}}`,
			want:      NoticeSettings{NoticePeriod: &metav1.Duration{Duration: 61 * time.Minute}},
			wantErrs:  field.ErrorList{field.Invalid(preemption.Child("noticePeriod"), "1h1m0s", "must be at most 1h0m0s")},
			wantInUse: []string{"spec.preemption.noticePeriod"},
		},
		"negative": {
			spec:     `{"preemption":{"noticePeriod":"-30s","noticeOnPriorityPreemption":false}}`,
			want:     NoticeSettings{NoticePeriod: &metav1.Duration{Duration: -30 * time.Second}, NoticeOnPriorityPreemption: ptr.To(false)},
			wantErrs: field.ErrorList{field.Invalid(preemption.Child("noticePeriod"), "-30s", "must not be negative")},
		},
		"an extension alone is in use": {
			spec:      `{"preemption":{"noticeOnReclaim":true}}`,
			want:      NoticeSettings{NoticeOnReclaim: ptr.To(true)},
			wantInUse: []string{"spec.preemption.noticeOnReclaim"},
		},
		"not a duration names the field": {
			spec: `{"preemption":{"noticePeriod":"five minutes"}}`, wantParse: "spec.preemption.noticePeriod",
		},
		"not a boolean names the field": {
			spec: `{"preemption":{"noticeOnReclaim":"yes"}}`, wantParse: "spec.preemption.noticeOnReclaim",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			read := expectEachKind(t, tc.spec, tc.wantParse, tc.want, tc.wantErrs,
				(*ClusterQueueExtension).Notice, (*CohortExtension).Notice)
			for kind, got := range read {
				var inUse []string
				for _, e := range got.InUse(preemption, gateOff, nil) {
					if e.Type != field.ErrorTypeForbidden || e.Detail != gateOff {
						t.Errorf("%s: InUse error %v, want Forbidden with the detail given", kind, e)
					}
					inUse = append(inUse, e.Field)
				}
				if diff := cmp.Diff(tc.wantInUse, inUse); diff != "" {
					t.Errorf("%s: InUse (-want +got):\n%s", kind, diff)
				}
			}
		})
	}
}

// On update, a setting the stored object already has is not reported again.
func TestNoticeInUseAgainstTheStoredObject(t *testing.T) {
	preemption := field.NewPath("spec", "preemption")
	five := &metav1.Duration{Duration: 5 * time.Minute}
	cases := map[string]struct {
		old, new string // specs; old "" is a create
		want     []string
	}{
		"create":                        {new: `{"preemption":{"noticePeriod":"5m","noticeOnReclaim":true}}`, want: []string{"spec.preemption.noticePeriod", "spec.preemption.noticeOnReclaim"}},
		"unchanged":                     {old: `{"preemption":{"noticePeriod":"5m","noticeOnReclaim":true}}`, new: `{"preemption":{"noticePeriod":"300s","noticeOnReclaim":true}}`},
		"a longer notice":               {old: `{"preemption":{"noticePeriod":"5m"}}`, new: `{"preemption":{"noticePeriod":"10m"}}`, want: []string{"spec.preemption.noticePeriod"}},
		"an extension added":            {old: `{"preemption":{"noticeOnReclaim":true}}`, new: `{"preemption":{"noticeOnReclaim":true,"noticeOnPriorityPreemption":true}}`, want: []string{"spec.preemption.noticeOnPriorityPreemption"}},
		"turned off":                    {old: `{"preemption":{"noticePeriod":"5m","noticeOnReclaim":true}}`, new: `{"preemption":{"noticePeriod":"0s"}}`},
		"set on an object without any":  {old: `{"parentName":"org"}`, new: `{"preemption":{"noticePeriod":"1m"}}`, want: []string{"spec.preemption.noticePeriod"}},
		"an extension from false to on": {old: `{"preemption":{"noticeOnReclaim":false}}`, new: `{"preemption":{"noticeOnReclaim":true}}`, want: []string{"spec.preemption.noticeOnReclaim"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old *NoticeSettings
			if tc.old != "" {
				stored, err := ParseNoticeSettings([]byte(tc.old))
				if err != nil {
					t.Fatal(err)
				}
				old = &stored
			}
			n, err := ParseNoticeSettings([]byte(tc.new))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range n.InUse(preemption, "off", old) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InUse (-want +got):\n%s", diff)
			}
		})
	}
	if n, err := ParseNoticeSettings([]byte(`{"preemption":{"noticePeriod":"5m"}}`)); err != nil || !cmp.Equal(n, NoticeSettings{NoticePeriod: five}) {
		t.Errorf("ParseNoticeSettings = %+v, %v", n, err)
	}
	if _, err := ParseNoticeSettings([]byte(`{"preemption":{"noticePeriod":5}}`)); err == nil || !strings.Contains(err.Error(), "spec.preemption.noticePeriod") {
		t.Errorf("ParseNoticeSettings of a number: %v, want an error naming the field", err)
	}
}
