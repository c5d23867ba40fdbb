package simulator

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// The chart's geometry, in pixels.
const (
	svgWidth   = 1100
	svgLabelW  = 200
	svgRightW  = 30
	svgRowH    = 16
	svgRowGap  = 4
	svgTitleH  = 46
	svgHeaderH = 22
	svgLegendH = 40
)

// svgPalette colours workloads' bars; it repeats past ten workloads.
var svgPalette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f", "#ff9da7", "#bab0ac"}

// WriteSVG draws a Gantt chart of who held quota when, one panel per run, on one time scale:
// a bar while a workload holds quota, a thin line while it waits, a red mark where it is preempted
// and a black tick where it finishes.
func WriteSVG(out io.Writer, runs ...*Result) error {
	var end time.Duration
	for _, r := range runs {
		end = max(end, r.End)
	}
	if end <= 0 {
		end = time.Second
	}
	var b strings.Builder
	y := 0
	var panels []string
	for _, r := range runs {
		panel, h := svgPanel(r, end, y)
		panels = append(panels, panel)
		y += h
	}
	height := y + svgLegendH
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	for _, p := range panels {
		b.WriteString(p)
	}
	fmt.Fprintf(&b, `<rect x="10" y="%d" width="24" height="12" fill="%s"/><text x="40" y="%d">holds quota</text>`+"\n", y+8, svgPalette[0], y+18)
	fmt.Fprintf(&b, `<line x1="140" y1="%d" x2="164" y2="%d" stroke="#999" stroke-width="2"/><text x="170" y="%d">waits</text>`+"\n", y+14, y+14, y+18)
	fmt.Fprintf(&b, `<path d="M250 %d l-5 -7 h10 z" fill="#d62728"/><text x="262" y="%d">preempted (hover for the reason)</text>`+"\n", y+19, y+18)
	fmt.Fprintf(&b, `<line x1="480" y1="%d" x2="480" y2="%d" stroke="black" stroke-width="2"/><text x="488" y="%d">finishes</text>`+"\n", y+6, y+22, y+18)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

func svgX(t, end time.Duration) float64 {
	plot := float64(svgWidth - svgLabelW - svgRightW)
	return float64(svgLabelW) + plot*float64(t)/float64(end)
}

// svgPanel draws one run starting at y and returns it with its height.
func svgPanel(r *Result, end time.Duration, y0 int) (string, int) {
	var head, b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&head, `<text x="10" y="%d" font-size="15" font-weight="bold">%s: %s</text>`+"\n", y0+20, esc(r.Scenario), esc(r.Mode.Title()))
	fmt.Fprintf(&head, `<text x="10" y="%d" fill="#555">simulated %s from %s</text>`+"\n", y0+37, esc(FormatOffset(r.End)), esc(r.Start.UTC().Format(time.RFC3339)))
	y := y0 + svgTitleH
	top := y

	color := map[string]string{}
	for i, w := range r.Workloads {
		color[w.Name] = svgPalette[i%len(svgPalette)]
	}
	preempted := map[string][]Event{}
	for _, e := range r.Events {
		if e.Kind == EventPreempted || e.Kind == EventEvicted {
			preempted[e.Workload] = append(preempted[e.Workload], e)
		}
	}
	for _, q := range r.ClusterQueues {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">ClusterQueue %s</text>`+"\n", y+15, esc(q.Name))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`+"\n", svgLabelW, y+svgHeaderH-2, svgWidth-svgRightW, y+svgHeaderH-2)
		y += svgHeaderH
		for _, w := range r.Workloads {
			if w.ClusterQueue != q.Name {
				continue
			}
			mid := y + svgRowH/2
			fmt.Fprintf(&b, `<text x="20" y="%d">%s</text>`+"\n", mid+4, esc(w.Name))
			for _, iv := range w.Intervals {
				x1, x2 := svgX(iv.From, end), svgX(iv.To, end)
				span := fmt.Sprintf("%s +%s to +%s", w.Name, FormatOffset(iv.From), FormatOffset(iv.To))
				if iv.Running {
					fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s holds quota</title></rect>`+"\n",
						x1, y, max(x2-x1, 0.5), svgRowH, color[w.Name], esc(span))
				} else {
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-width="2"><title>%s waits</title></line>`+"\n",
						x1, mid, x2, mid, esc(span))
				}
			}
			for _, e := range preempted[w.Name] {
				x := svgX(e.At, end)
				what := fmt.Sprintf("%s %s at +%s (%s)", w.Name, e.Kind, FormatOffset(e.At), e.Reason)
				if e.By != "" {
					what += " by " + e.By
				}
				fmt.Fprintf(&b, `<path d="M%.1f %d l-5 -7 h10 z" fill="#d62728"><title>%s</title></path>`+"\n", x, y+svgRowH/2+1, esc(what))
			}
			if w.Finished {
				x := svgX(w.FinishedAt, end)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="2"><title>%s finishes at +%s</title></line>`+"\n",
					x, y-1, x, y+svgRowH+1, esc(w.Name), esc(FormatOffset(w.FinishedAt)))
			}
			y += svgRowH + svgRowGap
		}
	}
	// The time axis goes under the rows.
	var axis strings.Builder
	step := tickStep(end)
	for t := time.Duration(0); t <= end; t += step {
		x := svgX(t, end)
		fmt.Fprintf(&axis, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x, top, x, y)
		fmt.Fprintf(&axis, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">+%s</text>`+"\n", x, y+14, esc(FormatOffset(t)))
	}
	y += 30
	return head.String() + axis.String() + b.String(), y - y0
}

// tickStep picks a round step that puts at most ten ticks on the axis.
func tickStep(end time.Duration) time.Duration {
	steps := []time.Duration{
		time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
		time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
		24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
	}
	for _, s := range steps {
		if end/s <= 10 {
			return s
		}
	}
	return end / 10
}
