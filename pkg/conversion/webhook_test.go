package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kueuev1beta1.AddToScheme, kueuev1beta2.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

const (
	v1beta1 = "kueue.x-k8s.io/v1beta1"
	v1beta2 = "kueue.x-k8s.io/v1beta2"
)

// upstreamConvert is what controller-runtime's handler (the one upstream Kueue's webhook set-up
// registers) returns for the same objects.
func upstreamConvert(t *testing.T, s *runtime.Scheme, desired string, objects ...string) []map[string]any {
	t.Helper()
	resp := review(t, crconversion.NewWebhookHandler(s, crconversion.NewRegistry()), desired, objects...)
	if resp.Result.Status != metav1.StatusSuccess {
		t.Fatalf("upstream's conversion failed: %s", resp.Result.Message)
	}
	return decodeAll(t, resp)
}

func review(t *testing.T, h http.Handler, desired string, objects ...string) *apix.ConversionResponse {
	t.Helper()
	in := apix.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apix.ConversionRequest{UID: types.UID("uid-1"), DesiredAPIVersion: desired},
	}
	for _, o := range objects {
		in.Request.Objects = append(in.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body.String())
	}
	var out apix.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != in.APIVersion || out.Kind != in.Kind || out.Response == nil || out.Response.UID != in.Request.UID {
		t.Fatalf("response does not answer the review: %s", rec.Body.String())
	}
	return out.Response
}

func decodeAll(t *testing.T, resp *apix.ConversionResponse) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, o := range resp.ConvertedObjects {
		m, err := decodeMap(o.Raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := decodeMap([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

func TestConvert(t *testing.T) {
	const (
		cqV1beta1 = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"cq","resourceVersion":"7"},
			"spec":{"cohort":"research","namespaceSelector":{},
			"preemption":{"withinClusterQueue":"LowerOrNewerEqualPriority","reclaimWithinCohort":"Any",
			"withinClusterQueueConfig":{"minAdmitDuration":"5m"},"preemptMinRuntime":"2m","reclaimMinRuntime":"0s"},
			"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"default","resources":[{"name":"cpu","nominalQuota":"4"}]}]}]},
			"status":{"pendingWorkloads":3}}`
		cqV1beta2 = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"cq"},
			"spec":{"cohortName":"research","preemption":{"withinClusterQueue":"LowerOrNewerEqualPriority",
			"withinClusterQueueConfig":{"minAdmitDuration":"4h"},"reclaimMinRuntime":"15m"}}}`
		cqOnlyOurs = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"only-ours"},
			"spec":{"preemption":{"preemptMinRuntime":"10m"}}}`
		cqNoFields = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"plain"},
			"spec":{"cohort":"c","admissionChecks":["check"],"flavorFungibility":{"whenCanBorrow":"Borrow"}}}`
		cohortV1beta1 = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"Cohort","metadata":{"name":"co"},
			"spec":{"parentName":"root","preemption":{"preemptMinRuntime":"30m","reclaimMinRuntime":"1h"}}}`
		cohortV1beta2 = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Cohort","metadata":{"name":"co"},
			"spec":{"preemption":{"reclaimMinRuntime":"1h"},"fairSharing":{"weight":"2"}}}`
		localQueue = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"LocalQueue","metadata":{"name":"lq","namespace":"team"},
			"spec":{"clusterQueue":"cq"},"status":{"pendingWorkloads":1,"flavorUsage":[{"name":"default","resources":[{"name":"cpu","total":"2"}]}]}}`
		workload = `{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":"wl","namespace":"team","labels":{"a":"b"}},
			"spec":{"queueName":"lq","podSets":[{"name":"main","count":1,"template":{"spec":{"containers":[{"name":"c","image":"i",
			"resources":{"requests":{"cpu":"1"}}}]}}}]}}`
		multiKueueCluster = `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"MultiKueueCluster","metadata":{"name":"worker"},
			"spec":{"kubeConfig":{"locationType":"Secret","location":"worker-secret"}}}`
	)
	// ours maps an object's index to the fields the handler must carry into it, beyond what
	// upstream's conversion produces.
	cases := map[string]struct {
		desired string
		objects []string
		ours    map[int]map[string]any // index -> path -> value
		wantErr []string               // fragments of the failure message
	}{
		"ClusterQueue v1beta1 to v1beta2 keeps every field": {
			desired: v1beta2, objects: []string{cqV1beta1},
			ours: map[int]map[string]any{0: {
				"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"},
				"spec.preemption.preemptMinRuntime":        "2m",
				"spec.preemption.reclaimMinRuntime":        "0s",
			}},
		},
		"ClusterQueue v1beta2 to v1beta1 keeps every field": {
			desired: v1beta1, objects: []string{cqV1beta2},
			ours: map[int]map[string]any{0: {
				"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "4h"},
				"spec.preemption.reclaimMinRuntime":        "15m",
			}},
		},
		"ClusterQueue whose preemption holds only our field": {
			desired: v1beta1, objects: []string{cqOnlyOurs},
			ours: map[int]map[string]any{0: {"spec.preemption.preemptMinRuntime": "10m"}},
		},
		"ClusterQueue without our fields converts as upstream's": {
			desired: v1beta2, objects: []string{cqNoFields},
		},
		"Cohort v1beta1 to v1beta2 keeps spec.preemption": {
			desired: v1beta2, objects: []string{cohortV1beta1},
			ours: map[int]map[string]any{0: {"spec.preemption": map[string]any{"preemptMinRuntime": "30m", "reclaimMinRuntime": "1h"}}},
		},
		"Cohort v1beta2 to v1beta1 keeps spec.preemption": {
			desired: v1beta1, objects: []string{cohortV1beta2},
			ours: map[int]map[string]any{0: {"spec.preemption": map[string]any{"reclaimMinRuntime": "1h"}}},
		},
		"the other converted kinds, several in one review, as upstream's": {
			desired: v1beta2, objects: []string{localQueue, multiKueueCluster, cqV1beta1, cohortV1beta1},
			ours: map[int]map[string]any{
				2: {
					"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"},
					"spec.preemption.preemptMinRuntime":        "2m",
					"spec.preemption.reclaimMinRuntime":        "0s",
				},
				3: {"spec.preemption": map[string]any{"preemptMinRuntime": "30m", "reclaimMinRuntime": "1h"}},
			},
		},
		"Workload v1beta2 to v1beta1 as upstream's": {
			desired: v1beta1, objects: []string{workload},
		},
		"a field nobody knows fails the conversion, naming it": {
			desired: v1beta2,
			objects: []string{localQueue, `{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"odd"},
				"spec":{"preemption":{"withinClusterQueue":"Never","minAdmitDurations":"5m"}}}`},
			wantErr: []string{`ClusterQueue "odd"`, "from v1beta1 to v1beta2", `unknown field "spec.preemption.minAdmitDurations"`},
		},
		"an unknown top-level field too": {
			desired: v1beta1,
			objects: []string{`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"lq","namespace":"ns"},"extra":1}`},
			wantErr: []string{`LocalQueue "ns/lq"`, `unknown field "extra"`},
		},
		"a parent of our field that is not an object": {
			desired: v1beta2,
			objects: []string{`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ClusterQueue","metadata":{"name":"bad"},"spec":{"preemption":"yes"}}`},
			wantErr: []string{`ClusterQueue "bad"`, "spec.preemption is a string, not an object"},
		},
		"a kind that has no conversion": {
			desired: v1beta2,
			objects: []string{`{"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor","metadata":{"name":"rf"}}`},
			wantErr: []string{`ResourceFlavor "rf"`, "has no conversion"},
		},
		"another group": {
			desired: "example.com/v1",
			objects: []string{cqV1beta1},
			wantErr: []string{`ClusterQueue "cq"`, "cannot convert ClusterQueue.kueue.x-k8s.io to group example.com"},
		},
	}
	s := testScheme(t)
	h := NewHandler(s, logr.Discard())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := review(t, h, tc.desired, tc.objects...)
			if tc.wantErr != nil {
				if resp.Result.Status != metav1.StatusFailure || len(resp.ConvertedObjects) != 0 {
					t.Fatalf("want a failure, got %+v", resp)
				}
				for _, f := range tc.wantErr {
					if !strings.Contains(resp.Result.Message, f) {
						t.Errorf("message %q does not say %q", resp.Result.Message, f)
					}
				}
				return
			}
			if resp.Result.Status != metav1.StatusSuccess {
				t.Fatalf("conversion failed: %s", resp.Result.Message)
			}
			got := decodeAll(t, resp)
			// Upstream's handler on the same objects without our fields: everything but our fields
			// must be exactly what upstream's conversion gives.
			var stripped []string
			for i, o := range tc.objects {
				m := mustJSON(t, o)
				for path := range tc.ours[i] {
					if _, found, err := take(m, strings.Split(path, ".")); err != nil || !found {
						t.Fatalf("test object %d has no %s", i, path)
					}
				}
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				stripped = append(stripped, string(b))
			}
			want := upstreamConvert(t, s, tc.desired, stripped...)
			for i := range want {
				for path, v := range tc.ours[i] {
					if err := put(want[i], strings.Split(path, "."), v); err != nil {
						t.Fatal(err)
					}
				}
				if want[i]["apiVersion"] != tc.desired {
					t.Errorf("object %d: apiVersion %v, want %s", i, want[i]["apiVersion"], tc.desired)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("converted objects (-want +got):\n%s", diff)
			}
		})
	}
}

// Every declared field of every kind survives a round trip through both versions, with the
// values the handler was given.
func TestEveryDeclaredFieldRoundTrips(t *testing.T) {
	h := NewHandler(testScheme(t), logr.Discard())
	for kind, fields := range tsapi.Fields() {
		for _, f := range fields {
			for _, from := range []string{v1beta1, v1beta2} {
				t.Run(kind+" "+f.String()+" from "+from, func(t *testing.T) {
					obj := map[string]any{"apiVersion": from, "kind": kind, "metadata": map[string]any{"name": "x"}}
					value := sampleValue(f.Schema)
					if err := put(obj, f.Path(), value); err != nil {
						t.Fatal(err)
					}
					raw, err := json.Marshal(obj)
					if err != nil {
						t.Fatal(err)
					}
					to := v1beta2
					if from == v1beta2 {
						to = v1beta1
					}
					there := review(t, h, to, string(raw))
					if there.Result.Status != metav1.StatusSuccess {
						t.Fatalf("to %s: %s", to, there.Result.Message)
					}
					back := review(t, h, from, string(there.ConvertedObjects[0].Raw))
					if back.Result.Status != metav1.StatusSuccess {
						t.Fatalf("back to %s: %s", from, back.Result.Message)
					}
					for i, resp := range []*apix.ConversionResponse{there, back} {
						out := decodeAll(t, resp)[0]
						got, found, err := take(out, f.Path())
						if err != nil || !found {
							t.Fatalf("conversion %d: %s missing (%v)", i+1, f, err)
						}
						if diff := cmp.Diff(value, got); diff != "" {
							t.Errorf("conversion %d: %s (-want +got):\n%s", i+1, f, diff)
						}
					}
				})
			}
		}
	}
}

// sampleValue is a valid value for a schema made of objects and duration strings.
func sampleValue(s apix.JSONSchemaProps) any {
	if s.Type != "object" {
		return "90m"
	}
	m := map[string]any{}
	for name, p := range s.Properties {
		m[name] = sampleValue(p)
	}
	return m
}

func TestServeHTTPRejectsWhatIsNotAReview(t *testing.T) {
	h := NewHandler(testScheme(t), logr.Discard())
	for name, body := range map[string]string{
		"not JSON":      "{",
		"no request":    `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`,
		"wrong request": `{"request":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body)))
			if rec.Code != http.StatusBadRequest {
				t.Errorf("HTTP %d, want 400", rec.Code)
			}
		})
	}
}
