package message

import "testing"

func TestForNamespace(t *testing.T) {
	cases := map[string]struct {
		text, ns, want string
	}{
		"a key of the reader's namespace stays": {
			text: "when team-a/job-train-x7k2 leaves", ns: "team-a", want: "when team-a/job-train-x7k2 leaves",
		},
		"a key of another namespace goes": {
			text: "held by team-b/job-secret-project-abcde, which declares no runtime and has no window", ns: "team-a",
			want: "held by a workload of another namespace, which declares no runtime and has no window",
		},
		"several keys, in a list and in parentheses, at the end of a sentence": {
			text: "waiting for the preemption notice of 3 workload(s) (team-a/w1, team-b/w2, team-c/w.3) to end. Then team-b/w4.",
			ns:   "team-a",
			want: "waiting for the preemption notice of 3 workload(s) (team-a/w1, a workload of another namespace, a workload of another namespace) to end. Then a workload of another namespace.",
		},
		"resource names and timestamps are no keys": {
			text: "needs 2 nvidia.com/gpu in flavor a100 until 2026-11-29T12:00:00Z (50% used, 1/2 free)", ns: "team-a",
			want: "needs 2 nvidia.com/gpu in flavor a100 until 2026-11-29T12:00:00Z (50% used, 1/2 free)",
		},
		"no slash at all": {
			text: "waiting for a time-sharing turn", ns: "team-a", want: "waiting for a time-sharing turn",
		},
		"a path of more than one slash is no key": {
			text: "see docs/a/b", ns: "team-a", want: "see docs/a/b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ForNamespace(tc.text, tc.ns); got != tc.want {
				t.Errorf("ForNamespace(%q, %q)\n got %q\nwant %q", tc.text, tc.ns, got, tc.want)
			}
		})
	}
}
