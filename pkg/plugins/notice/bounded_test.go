package notice

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

// The messages that quote a notice's preemptor and the reason it ended are bounded, whatever
// their length.
func TestNoticeMessagesBounded(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	long := &annotations.Notice{Start: start, Deadline: start.Add(time.Minute), Reason: timebased.Reason,
		Preemptor: "ns/" + strings.Repeat("é", 100*1024), PreemptorUID: "u"}
	cases := map[string]string{
		"withdrawn": EndedMessage(long, Decision{Outcome: Withdrawn, Why: "workload " + long.Preemptor + " was deleted"}),
		"ended":     EndedMessage(long, Decision{Outcome: EndedEarly, Why: "the workload finished"}),
	}
	for name, got := range cases {
		t.Run(name, func(t *testing.T) {
			if len(got) > message.MaxLen || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
				t.Errorf("message of %d bytes (valid UTF-8: %t), want at most %d, cut with an ellipsis", len(got), utf8.ValidString(got), message.MaxLen)
			}
		})
	}
}
