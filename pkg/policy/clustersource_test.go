package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
)

// loadRecorder is a cluster source that records the calls it gets.
type loadRecorder struct {
	name string
	err  error
	log  *[]string
}

func (l *loadRecorder) Load(context.Context, client.Reader) error {
	*l.log = append(*l.log, "load "+l.name)
	return l.err
}

func (l *loadRecorder) Setup(ctrl.Manager) error {
	*l.log = append(*l.log, "setup "+l.name)
	return l.err
}

// TestClusterSources: the table builds one source per unit that has one, in the table's order;
// loading stops at the first error, and sources that are not cluster sources are skipped.
func TestClusterSources(t *testing.T) {
	failed := errors.New("no access")
	cases := map[string]struct {
		failing  string
		wantLog  []string
		wantErr  error
		wantSize int
	}{
		"every source loaded, then set up": {
			wantLog:  []string{"load a", "load b", "setup a", "setup b"},
			wantSize: 2,
		},
		"the first failure stops the load": {
			failing: "a", wantLog: []string{"load a"}, wantErr: failed, wantSize: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var log []string
			maker := func(name string) func(client.Reader) ClusterSource {
				return func(client.Reader) ClusterSource {
					l := &loadRecorder{name: name, log: &log}
					if name == tc.failing {
						l.err = failed
					}
					return l
				}
			}
			table := Table{{Feature: "A", NewSource: maker("a")}, {Feature: "N"}, {Feature: "B", NewSource: maker("b")}}
			src := table.NewSources(nil)
			if len(src) != tc.wantSize {
				t.Fatalf("NewSources built %d sources, want %d", len(src), tc.wantSize)
			}
			src = append(src, "not a cluster source")
			err := LoadSources(context.Background(), src, nil)
			if err == nil {
				err = SetupSources(nil, src)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantLog, log); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEvictionDelay: the table delays an eviction by the longest delay of its units that delay
// evictions, and not at all when none does.
func TestEvictionDelay(t *testing.T) {
	delay := func(byReason map[string]time.Duration) func(Sources, *schdcache.ClusterQueueSnapshot) func(string) time.Duration {
		return func(Sources, *schdcache.ClusterQueueSnapshot) func(string) time.Duration {
			if byReason == nil {
				return nil
			}
			return func(reason string) time.Duration { return byReason[reason] }
		}
	}
	cases := map[string]struct {
		table Table
		want  map[string]time.Duration // nil: no delay function at all
	}{
		"no unit delays":  {table: Table{{Feature: "A"}}},
		"one has nothing": {table: Table{{Feature: "A", Delays: delay(nil)}}},
		"one unit": {table: Table{{Feature: "A", Delays: delay(map[string]time.Duration{"x": time.Minute})}},
			want: map[string]time.Duration{"x": time.Minute, "y": 0}},
		"the longest of two": {
			table: Table{{Feature: "A", Delays: delay(map[string]time.Duration{"x": time.Minute, "y": time.Hour})},
				{Feature: "B", Delays: delay(map[string]time.Duration{"x": 2 * time.Minute})}},
			want: map[string]time.Duration{"x": 2 * time.Minute, "y": time.Hour},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := tc.table.EvictionDelay(nil, nil)
			if (d == nil) != (tc.want == nil) {
				t.Fatalf("delay function given = %t, want %t", d != nil, tc.want != nil)
			}
			got := map[string]time.Duration{}
			for reason := range tc.want {
				got[reason] = d(reason)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); tc.want != nil && diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetupControllers: the table sets up its units' controllers in its order, and a failure
// stops it with the feature's name.
func TestSetupControllers(t *testing.T) {
	cases := map[string]struct {
		failing string
		want    []Feature
		wantErr string
	}{
		"all set up":               {want: []Feature{"A", "B"}},
		"a failure names its unit": {failing: "A", want: []Feature{"A"}, wantErr: "setting up the controllers of A: no access"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []Feature
			setup := func(f Feature) func(ctrl.Manager, Env) error {
				return func(ctrl.Manager, Env) error {
					got = append(got, f)
					if f == Feature(tc.failing) {
						return errors.New("no access")
					}
					return nil
				}
			}
			err := Table{{Feature: "A", Setup: setup("A")}, {Feature: "N"}, {Feature: "B", Setup: setup("B")}}.SetupControllers(nil, Env{})
			if gotErr := fmt.Sprint(err); (err != nil || tc.wantErr != "") && gotErr != tc.wantErr {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("set up (-want +got):\n%s", diff)
			}
		})
	}
}
