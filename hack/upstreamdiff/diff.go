package main

import (
	"fmt"
	"io"
)

// diffLine is one line of a line diff: kept (' '), upstream's only ('-') or ours only ('+').
type diffLine struct {
	op   byte
	text string
}

// lineDiff is a longest-common-subsequence diff of a and b. Functions are short enough for the
// quadratic table.
func lineDiff(a, b []string) []diffLine {
	n, m := len(a), len(b)
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	out := make([]diffLine, 0, max(n, m))
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffLine{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{'-', a[i]})
			i++
		default:
			out = append(out, diffLine{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{'-', a[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{'+', b[j]})
	}
	return out
}

// counts returns the number of lines only ours has and only upstream's has.
func counts(d []diffLine) (added, removed int) {
	for _, l := range d {
		switch l.op {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}

func changed(d []diffLine) bool {
	a, r := counts(d)
	return a+r > 0
}

// writeUnified prints d as unified diff hunks with context lines of context around changes.
func writeUnified(w io.Writer, d []diffLine, context int) {
	// Line numbers (1-based) in upstream's and our text at each diff line.
	aLine, bLine := make([]int, len(d)+1), make([]int, len(d)+1)
	aLine[0], bLine[0] = 1, 1
	for k, l := range d {
		aLine[k+1], bLine[k+1] = aLine[k], bLine[k]
		if l.op != '+' {
			aLine[k+1]++
		}
		if l.op != '-' {
			bLine[k+1]++
		}
	}
	for k := 0; k < len(d); {
		if d[k].op == ' ' {
			k++
			continue
		}
		start := max(k-context, 0)
		end := k
		// Extend the hunk while the next change is within 2*context kept lines.
		for end < len(d) {
			if d[end].op != ' ' {
				end++
				continue
			}
			next := end
			for next < len(d) && d[next].op == ' ' {
				next++
			}
			if next == len(d) || next-end > 2*context {
				end = min(end+context, len(d))
				break
			}
			end = next
		}
		aCount, bCount := 0, 0
		for _, l := range d[start:end] {
			if l.op != '+' {
				aCount++
			}
			if l.op != '-' {
				bCount++
			}
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", aLine[start], aCount, bLine[start], bCount)
		for _, l := range d[start:end] {
			fmt.Fprintf(w, "%c%s\n", l.op, l.text)
		}
		k = end
	}
}
