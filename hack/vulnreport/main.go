// Command vulnreport reads govulncheck's JSON stream (-format json) on standard input, prints one
// line per vulnerability found, and fails when one that our code calls is not accepted in the
// file named by -accepted (lines "ID reason"; docs/reliability.md says why each is accepted).
//
//	govulncheck -format json ./... | go run ./hack/vulnreport -accepted hack/vulncheck-accepted.txt
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

type message struct {
	Finding *finding `json:"finding"`
}

// Level is how close our code comes to a vulnerability, as govulncheck reports it.
type Level int

const (
	Required Level = iota // a module in the build list
	Imported              // a package our code imports
	Called                // a vulnerable function our code calls
)

func (l Level) String() string { return [...]string{"required", "imported", "called"}[l] }

// Vuln is one vulnerability and the closest our code comes to it.
type Vuln struct {
	ID, Module, Version, Fixed string
	Level                      Level
}

// Read collects the vulnerabilities of a govulncheck JSON stream, sorted by ID.
func Read(r io.Reader) ([]Vuln, error) {
	byID := map[string]*Vuln{}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's JSON output: %w", err)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 {
			continue
		}
		level := Required
		switch top := f.Trace[0]; {
		case top.Function != "":
			level = Called
		case top.Package != "":
			level = Imported
		}
		v, ok := byID[f.OSV]
		if !ok {
			v = &Vuln{ID: f.OSV, Module: f.Trace[0].Module, Version: f.Trace[0].Version, Fixed: f.FixedVersion, Level: level}
			byID[f.OSV] = v
		}
		v.Level = max(v.Level, level)
	}
	var out []Vuln
	for _, v := range byID {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b Vuln) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ReadAccepted reads "ID reason" lines; blank lines and # comments are skipped. A line without a
// reason is an error: an accepted vulnerability says why.
func ReadAccepted(r io.Reader) (map[string]string, error) {
	accepted := map[string]string{}
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("line %d: %s has no reason", n, id)
		}
		accepted[id] = strings.TrimSpace(reason)
	}
	return accepted, s.Err()
}

// Unaccepted lists the called vulnerabilities that are not accepted.
func Unaccepted(vulns []Vuln, accepted map[string]string) []Vuln {
	var out []Vuln
	for _, v := range vulns {
		if _, ok := accepted[v.ID]; v.Level == Called && !ok {
			out = append(out, v)
		}
	}
	return out
}

func main() {
	acceptedFile := flag.String("accepted", "", "File of accepted vulnerabilities, one \"ID reason\" a line.")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *acceptedFile); err != nil {
		fmt.Fprintf(os.Stderr, "vulnreport: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, acceptedFile string) error {
	accepted := map[string]string{}
	if acceptedFile != "" {
		f, err := os.Open(acceptedFile)
		if err != nil {
			return err
		}
		defer f.Close()
		if accepted, err = ReadAccepted(f); err != nil {
			return fmt.Errorf("%s: %w", acceptedFile, err)
		}
	}
	vulns, err := Read(in)
	if err != nil {
		return err
	}
	for _, v := range vulns {
		fixed := v.Fixed
		if fixed == "" {
			fixed = "no fix"
		}
		note := ""
		if reason, ok := accepted[v.ID]; ok {
			note = "  accepted: " + reason
		}
		fmt.Fprintf(out, "%-14s %-8s %s@%s (fixed in %s)%s\n", v.ID, v.Level, v.Module, v.Version, fixed, note)
	}
	if bad := Unaccepted(vulns, accepted); len(bad) > 0 {
		var ids []string
		for _, v := range bad {
			ids = append(ids, v.ID)
		}
		return fmt.Errorf("%d vulnerabilities called by our code are neither fixed nor accepted: %s (upgrade the module, or explain in docs/reliability.md and %s)",
			len(bad), strings.Join(ids, ", "), acceptedFile)
	}
	fmt.Fprintf(out, "%d vulnerabilities found, none called by our code that is not accepted\n", len(vulns))
	return nil
}
