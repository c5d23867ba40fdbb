// Package promqueries reads the PromQL of the chart's Grafana dashboard and alerting rules, and
// checks that every metric and label it names is one a manager serves, against a /metrics scrape.
// A query naming a series that does not exist shows nothing and never fires: the check is there
// so that a rename or a typo fails a test instead.
package promqueries

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Query is one PromQL expression and where it comes from.
type Query struct {
	Source string
	Expr   string
	// Legend is a dashboard target's legendFormat; its {{label}}s must exist too.
	Legend string
}

// Dashboard and Rules are the files under the chart that hold the queries.
var (
	Dashboard = filepath.Join("charts", "kueue-timeshare", "files", "grafana-dashboard.json")
	Rules     = filepath.Join("charts", "kueue-timeshare", "files", "prometheus-rules.yaml")
)

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// Load reads every query of the dashboard (panel targets and template variables) and of the
// rules file, from the repository at root.
func Load(root string) ([]Query, error) {
	var out []Query
	raw, err := os.ReadFile(filepath.Join(root, Dashboard))
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", Dashboard, err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", Dashboard, p.Title)
		}
		for _, t := range p.Targets {
			out = append(out, Query{Source: "dashboard panel " + p.Title, Expr: t.Expr, Legend: t.LegendFormat})
		}
	}
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		text, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: a query other than label_values(metric, label): %q", Dashboard, v.Name, text)
		}
		out = append(out, Query{Source: "dashboard variable " + v.Name, Expr: "group by (" + m[2] + ") (" + m[1] + ")"})
	}

	raw, err = os.ReadFile(filepath.Join(root, Rules))
	if err != nil {
		return nil, err
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("%s: %w", Rules, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Source: "alert " + r.Alert + r.Record, Expr: r.Expr})
		}
	}
	return out, nil
}

// Series is what scrapes showed: metric name (as exposed: histograms as _bucket, _sum, _count)
// to the label names its series carried.
type Series map[string]map[string]bool

var (
	sampleName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// Add reads a scrape in Prometheus' text format into s.
func (s Series) Add(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := sampleName.FindString(line)
		if name == "" {
			return fmt.Errorf("not a sample: %q", line)
		}
		if s[name] == nil {
			s[name] = map[string]bool{}
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				return fmt.Errorf("unclosed labels: %q", line)
			}
			for _, m := range labelPair.FindAllStringSubmatch(rest[:end], -1) {
				s[name][m[1]] = true
			}
		}
	}
	return sc.Err()
}

// Merge adds other's series to s.
func (s Series) Merge(other Series) {
	for name, labels := range other {
		if s[name] == nil {
			s[name] = map[string]bool{}
		}
		for l := range labels {
			s[name][l] = true
		}
	}
}

// keywords are PromQL's identifiers that are neither metrics nor functions.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}

// aggregations may be followed by their grouping before their parenthesis.
var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}

// grouping keywords take a list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// Check returns what q names that s does not hold: metrics, the labels of their matchers, the
// labels it groups or joins by, and the labels of its legend. It reads PromQL only as far as the
// project's queries need (selectors, aggregations, joins, functions, string arguments, ranges).
func Check(q Query, s Series) []string {
	var problems []string
	var metrics []string
	var groupLabels []string
	toks := tokens(q.Expr)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != ident {
			continue
		}
		next := token{}
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case grouping[t.text]:
			if next.text != "(" {
				continue
			}
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == ident {
					groupLabels = append(groupLabels, toks[i].text)
				}
			}
		case keywords[t.text], aggregations[t.text] && (next.text == "(" || grouping[next.text]):
		case next.text == "(":
			// A function or an aggregation.
		default:
			metrics = append(metrics, t.text)
			labels, ok := s[t.text]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not served", q.Source, t.text))
			}
			if next.text != "{" {
				continue
			}
			for i += 2; i < len(toks) && toks[i].text != "}"; i++ {
				if toks[i].kind == ident && ok && !labels[toks[i].text] && toks[i].text != "__name__" {
					problems = append(problems, fmt.Sprintf("%s: metric %s has no label %s", q.Source, t.text, toks[i].text))
				}
			}
		}
	}
	if len(metrics) == 0 {
		problems = append(problems, fmt.Sprintf("%s: names no metric: %q", q.Source, q.Expr))
	}
	for _, m := range regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`).FindAllStringSubmatch(q.Legend, -1) {
		groupLabels = append(groupLabels, m[1])
	}
	for _, l := range groupLabels {
		if !slices.ContainsFunc(metrics, func(m string) bool { return s[m][l] }) {
			problems = append(problems, fmt.Sprintf("%s: no metric it reads has the label %s (of %s)", q.Source, l, strings.Join(metrics, ", ")))
		}
	}
	return problems
}

type kind int

const (
	ident kind = iota + 1
	str
	punct
	number
)

type token struct {
	kind kind
	text string
}

// tokens splits PromQL into identifiers, strings, numbers and punctuation, dropping range and
// subquery brackets with their durations.
func tokens(expr string) []token {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			out = append(out, token{str, expr[i+1 : min(j, len(expr))]})
			i = j + 1
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return out
			}
			i += j + 1
		case isIdentStart(c):
			j := i
			for j < len(expr) && (isIdentStart(expr[j]) || expr[j] >= '0' && expr[j] <= '9') {
				j++
			}
			out = append(out, token{ident, expr[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(expr) && (expr[j] >= '0' && expr[j] <= '9' || expr[j] == '.' || expr[j] == 'e') {
				j++
			}
			out = append(out, token{number, expr[i:j]})
			i = j
		default:
			out = append(out, token{punct, string(c)})
			i++
		}
	}
	return out
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
