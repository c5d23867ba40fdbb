// Command benchratio reads `go test -bench -benchmem` output on stdin and prints, for every
// benchmark that has an ".../upstream" and an ".../ours" variant, the ratio ours/upstream of
// time, bytes and allocations per operation. It echoes its input first, so nothing is lost.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// A benchmark line: name-GOMAXPROCS, iterations, then value/unit pairs.
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

type result map[string]float64 // unit -> value

func main() {
	results := map[string]map[string]result{} // base name -> impl -> values
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		text := sc.Text()
		fmt.Println(text)
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		name := m[1]
		i := strings.LastIndex(name, "/")
		if i < 0 {
			continue
		}
		base, impl := name[:i], name[i+1:]
		if impl != "upstream" && impl != "ours" {
			continue
		}
		fields := strings.Fields(m[2])
		r := result{}
		for j := 0; j+1 < len(fields); j += 2 {
			if v, err := strconv.ParseFloat(fields[j], 64); err == nil {
				r[fields[j+1]] = v
			}
		}
		if results[base] == nil {
			results[base] = map[string]result{}
		}
		results[base][impl] = r
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	names := make([]string, 0, len(results))
	for n, byImpl := range results {
		if byImpl["upstream"] != nil && byImpl["ours"] != nil {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no upstream/ours pairs found")
		os.Exit(1)
	}
	sort.Strings(names)
	fmt.Println("\nours / upstream (below 1.00 means ours is cheaper):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\ttime\tbytes\tallocs")
	for _, n := range names {
		up, ours := results[n]["upstream"], results[n]["ours"]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, ratio(ours, up, "ns/op"), ratio(ours, up, "B/op"), ratio(ours, up, "allocs/op"))
	}
	tw.Flush()
}

func ratio(ours, up result, unit string) string {
	o, ok1 := ours[unit]
	u, ok2 := up[unit]
	if !ok1 || !ok2 || u == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", o/u)
}
