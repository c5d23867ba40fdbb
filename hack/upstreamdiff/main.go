// Command upstreamdiff compares every function of ours that names its upstream original with that
// original, as found in the module version go.mod requires. A mirrored function carries, in its
// doc comment, the line
//
//	// Upstream's original: <name>[ and <name>...] in <module>/<package path>.
//
// where <name> is a function (name) or a method ((*Recv).name or (Recv).name). Both sides are
// printed without comments or blank lines, with import names mapped to upstream's, and diffed.
// It prints a unified diff per function and a per-file summary, and fails when an original no
// longer exists (the first thing an upgrade hits) or a convention line cannot be read.
//
// A "// timeshare:" comment line inside a mirror marks an addition of ours; -strict also fails
// when a differing line is not covered by one (marks.go says what a mark covers).
//
//	go run ./hack/upstreamdiff [-summary] [-strict] [-module sigs.k8s.io/kueue] [dir]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const marker = "Upstream's original:"

// addition is how a comment line marks a statement of ours inside a mirror.
const addition = "timeshare:"

// conventionRE is one convention line, without the leading "//".
var conventionRE = regexp.MustCompile(`^ Upstream's original: (.+?) in (\S+)\.$`)

// nameRE is one named original: a function or a method with its receiver type.
var nameRE = regexp.MustCompile(`^(?:\((\*?)([A-Za-z_]\w*)\)\.)?([A-Za-z_]\w*)$`)

func main() {
	summaryOnly := flag.Bool("summary", false, "print the per-file summary only, not the diffs")
	strict := flag.Bool("strict", false, "fail when a mirror has a line that differs from upstream's and no \"// "+addition+"\" mark covers")
	module := flag.String("module", "sigs.k8s.io/kueue", "module the originals are in; its version is the one go.mod requires")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	dir, version, err := moduleDir(root, *module)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamdiff:", err)
		os.Exit(2)
	}
	r, err := compare(root, *module, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamdiff:", err)
		os.Exit(2)
	}
	if !r.write(os.Stdout, *module+"@"+version, *summaryOnly, *strict) {
		os.Exit(1)
	}
}

// moduleDir returns where the Go command keeps module at the version root's go.mod requires,
// downloading it into the module cache if it is not there yet.
func moduleDir(root, module string) (dir, version string, err error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m struct{ Dir, Version, Error string }
	if jerr := json.Unmarshal(out, &m); jerr == nil && m.Error != "" {
		return "", "", fmt.Errorf("go mod download %s: %s", module, m.Error)
	}
	if err != nil {
		return "", "", fmt.Errorf("go mod download %s: %v: %s", module, err, stderr.String())
	}
	if m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: no directory reported", module)
	}
	return m.Dir, m.Version, nil
}

// original is one upstream function a mirror names.
type original struct {
	recv string // receiver type name, without "*"; "" for a function
	ptr  bool
	name string
}

func (o original) String() string {
	switch {
	case o.recv == "":
		return o.name
	case o.ptr:
		return "(*" + o.recv + ")." + o.name
	default:
		return "(" + o.recv + ")." + o.name
	}
}

// mirror is one function of ours with its convention line.
type mirror struct {
	path      string // relative to the scanned root, slash-separated
	line      int
	name      string // ours, in the same notation as original.String
	pkg       string // upstream package path, relative to the module
	originals []original
	ours      string // printed
	upstream  string // printed, the originals one after another
	fset      *token.FileSet
	decl      *ast.FuncDecl
	file      *ast.File
	upFiles   []string
	missing   []original
	diff      []diffLine
	// marks counts the comment lines that mark an addition of ours: inside the body, and the
	// doc comment's last line.
	marks int
	// covered are the source lines a mark covers, and srcLines the source line of each line of
	// ours; unmarked flags the lines of diff that no mark covers.
	covered  map[int]bool
	srcLines []int
	unmarked []bool
}

// result is everything compare found.
type result struct {
	mirrors []*mirror
	// problems are convention lines that could not be read or placed.
	problems []string
	// unreadable are mirrors whose printed lines could not be traced to their source lines, so
	// that marks cannot be placed.
	unreadable []string
}

// compare scans the non-test Go files under root for convention lines and compares each mirror
// with its originals in moduleDir, the directory of module.
func compare(root, module, moduleDir string) (*result, error) {
	r := &result{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || name == "vendor" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return r.scanFile(p, filepath.ToSlash(rel), module)
	})
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*upstreamPkg{}
	for _, m := range r.mirrors {
		up, ok := pkgs[m.pkg]
		if !ok {
			up, err = parseUpstream(filepath.Join(moduleDir, filepath.FromSlash(m.pkg)))
			if err != nil {
				return nil, err
			}
			pkgs[m.pkg] = up
		}
		var texts []string
		var names map[string]string
		for _, o := range m.originals {
			fd, f := up.find(o)
			if fd == nil {
				m.missing = append(m.missing, o)
				continue
			}
			if names == nil {
				names = importNames(f)
			}
			texts = append(texts, printFunc(up.fset, fd, nil))
			if rel, err := filepath.Rel(moduleDir, up.fset.File(fd.Pos()).Name()); err == nil && !slices.Contains(m.upFiles, filepath.ToSlash(rel)) {
				m.upFiles = append(m.upFiles, filepath.ToSlash(rel))
			}
		}
		if len(m.missing) > 0 {
			continue
		}
		// Our import names, mapped to upstream's for the same paths.
		rename := map[string]string{}
		for p, ours := range importNames(m.file) {
			if theirs, ok := names[p]; ok && theirs != ours {
				rename[ours] = theirs
			}
		}
		m.ours = printFunc(m.fset, m.decl, rename)
		m.upstream = strings.Join(texts, "\n")
		m.diff = lineDiff(lines(m.upstream), lines(m.ours))
		if n := len(lines(m.ours)); n != len(m.srcLines) {
			r.unreadable = append(r.unreadable, fmt.Sprintf("%s:%d: %s: its %d printed lines do not match its %d source lines of code (a blank line inside a string, or not gofmt-formatted)", m.path, m.line, m.name, n, len(m.srcLines)))
		}
		m.unmarked = unmarkedLines(m.diff, m.srcLines, m.covered)
	}
	return r, nil
}

// scanFile records the mirrors of one file; they are printed once upstream's import names are known.
func (r *result) scanFile(filename, rel, module string) error {
	src, err := os.ReadFile(filename)
	if err != nil {
		return err
	}
	if !bytes.Contains(src, []byte(marker)) {
		return nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		return err
	}
	docs := map[*ast.CommentGroup]*ast.FuncDecl{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Doc != nil {
			docs[fd.Doc] = fd
		}
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			// Only a line that starts with the marker is a convention line.
			if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(c.Text, "//")), marker) {
				continue
			}
			pos := fset.Position(c.Pos())
			where := fmt.Sprintf("%s:%d", rel, pos.Line)
			fd := docs[cg]
			if fd == nil {
				r.problems = append(r.problems, where+": convention line is not in a function's doc comment")
				continue
			}
			originals, pkg, err := parseConvention(c.Text, module)
			if err != nil {
				r.problems = append(r.problems, where+": "+err.Error())
				continue
			}
			marks := 0
			if isMark(cg.List[len(cg.List)-1]) {
				marks++ // the signature's
			}
			for _, body := range f.Comments {
				if fd.Body == nil || body.Pos() < fd.Body.Lbrace || body.End() > fd.Body.Rbrace {
					continue
				}
				for _, l := range body.List {
					if isMark(l) {
						marks++
					}
				}
			}
			r.mirrors = append(r.mirrors, &mirror{
				marks:     marks,
				covered:   coveredLines(fset, fd, f.Comments),
				srcLines:  codeLines(fset, fd, src),
				path:      rel,
				line:      pos.Line,
				name:      funcName(fd).String(),
				pkg:       pkg,
				originals: originals,
				fset:      fset,
				decl:      fd,
				file:      f,
			})
		}
	}
	return nil
}

// parseConvention reads one convention line: the originals it names and their package path
// relative to module.
func parseConvention(text, module string) ([]original, string, error) {
	m := conventionRE.FindStringSubmatch(strings.TrimPrefix(text, "//"))
	if m == nil {
		return nil, "", fmt.Errorf("convention line does not read %q: %s", "// Upstream's original: <func or (*Recv).method>[ and <other>] in <package>.", text)
	}
	pkg := m[2]
	if pkg != module && !strings.HasPrefix(pkg, module+"/") {
		return nil, "", fmt.Errorf("package %s is not in module %s", pkg, module)
	}
	pkg = strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	var out []original
	for _, n := range strings.Split(m[1], " and ") {
		nm := nameRE.FindStringSubmatch(strings.TrimSpace(n))
		if nm == nil {
			return nil, "", fmt.Errorf("%q is not a function or (*Recv).method", n)
		}
		out = append(out, original{ptr: nm[1] == "*", recv: nm[2], name: nm[3]})
	}
	return out, pkg, nil
}

func funcName(fd *ast.FuncDecl) original {
	o := original{name: fd.Name.Name}
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return o
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		o.ptr = true
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		o.recv = id.Name
	}
	return o
}

// upstreamPkg is one upstream package, parsed.
type upstreamPkg struct {
	fset  *token.FileSet
	files []*ast.File
}

func parseUpstream(dir string) (*upstreamPkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("upstream package: %w", err)
	}
	up := &upstreamPkg{fset: token.NewFileSet()}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(up.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		up.files = append(up.files, f)
	}
	return up, nil
}

// find returns the declaration of o, or nil.
func (up *upstreamPkg) find(o original) (*ast.FuncDecl, *ast.File) {
	for _, f := range up.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && funcName(fd) == o {
				return fd, f
			}
		}
	}
	return nil, nil
}

// importNames maps each import path of f to the name it is used by in f.
func importNames(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, is := range f.Imports {
		p, err := strconv.Unquote(is.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		out[p] = name
	}
	return out
}

// printFunc prints fd without its comments and without blank lines, its package qualifiers
// renamed by rename (our import names to upstream's).
func printFunc(fset *token.FileSet, fd *ast.FuncDecl, rename map[string]string) string {
	decl := *fd
	decl.Doc = nil
	renamePackages(&decl, rename)
	stripComments(decl.Body)
	// A file of its own without comments, so that the printer prints none but the node comments
	// stripComments removed.
	f := &ast.File{Name: ast.NewIdent("p"), Decls: []ast.Decl{&decl}}
	var b bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if err := cfg.Fprint(&b, fset, f); err != nil {
		return "// cannot print: " + err.Error()
	}
	var out []string
	for _, l := range strings.Split(b.String(), "\n")[1:] {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// stripComments drops the comments the parser attaches to nodes inside a function body (a local
// declaration's doc, a struct field's comment), which the printer prints from the node.
func stripComments(body ast.Node) {
	if body == nil {
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.GenDecl:
			x.Doc = nil
		case *ast.ValueSpec:
			x.Doc, x.Comment = nil, nil
		case *ast.TypeSpec:
			x.Doc, x.Comment = nil, nil
		case *ast.ImportSpec:
			x.Doc, x.Comment = nil, nil
		case *ast.Field:
			x.Doc, x.Comment = nil, nil
		}
		return true
	})
}

// renamePackages rewrites package qualifiers in decl by rename. Package names are not shadowed by
// locals in this code base; a local of the same name would be renamed too, and show in the diff.
func renamePackages(decl *ast.FuncDecl, rename map[string]string) {
	if len(rename) == 0 {
		return
	}
	ast.Inspect(decl, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if to, ok := rename[id.Name]; ok {
					sel.X = &ast.Ident{NamePos: id.NamePos, Name: to}
				}
			}
		}
		return true
	})
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// write prints the diffs (unless summaryOnly) and the summary; it reports whether every original
// was found and every convention line read, and under strict whether every line that differs
// from upstream's is covered by a mark (those that are not are listed by function).
func (r *result) write(w io.Writer, moduleVersion string, summaryOnly, strict bool) bool {
	if !summaryOnly {
		for _, m := range r.mirrors {
			if len(m.missing) > 0 || !changed(m.diff) {
				continue
			}
			fmt.Fprintf(w, "--- %s/%s: %s\n", moduleVersion, strings.Join(m.upFiles, ", "), joinOriginals(m.originals))
			fmt.Fprintf(w, "+++ %s:%d: %s\n", m.path, m.line, m.name)
			writeUnified(w, m.diff, 3)
			fmt.Fprintln(w)
		}
	}
	type fileSum struct {
		mirrors, identical, added, removed, marks, unAdded, unRemoved int
	}
	sums := map[string]*fileSum{}
	var files []string
	var total fileSum
	ok := len(r.problems) == 0
	for _, m := range r.mirrors {
		s := sums[m.path]
		if s == nil {
			s = &fileSum{}
			sums[m.path] = s
			files = append(files, m.path)
		}
		s.mirrors++
		total.mirrors++
		s.marks += m.marks
		total.marks += m.marks
		if len(m.missing) > 0 {
			ok = false
			continue
		}
		a, d := counts(m.diff)
		s.added += a
		s.removed += d
		total.added += a
		total.removed += d
		ua, ud := m.unmarkedCounts()
		s.unAdded += ua
		s.unRemoved += ud
		total.unAdded += ua
		total.unRemoved += ud
		if a+d == 0 {
			s.identical++
			total.identical++
		}
	}
	slices.Sort(files)
	fmt.Fprintf(w, "Mirrors of %s (lines: + ours only, - upstream's only; marked: additions marked %q; unmarked: + and - lines no mark covers):\n", moduleVersion, "// "+addition)
	for _, f := range files {
		s := sums[f]
		fmt.Fprintf(w, "  %-62s %3d functions, %3d identical, +%-4d -%-4d %3d marked, unmarked +%d -%d\n", f, s.mirrors, s.identical, s.added, s.removed, s.marks, s.unAdded, s.unRemoved)
	}
	fmt.Fprintf(w, "  %-62s %3d functions, %3d identical, +%-4d -%-4d %3d marked, unmarked +%d -%d\n", "total", total.mirrors, total.identical, total.added, total.removed, total.marks, total.unAdded, total.unRemoved)
	for _, m := range r.mirrors {
		for _, o := range m.missing {
			fmt.Fprintf(w, "MISSING: %s:%d: %s names %s in %s, which %s does not have\n", m.path, m.line, m.name, o, m.pkg, moduleVersion)
		}
	}
	for _, p := range r.problems {
		fmt.Fprintln(w, "BAD CONVENTION LINE:", p)
	}
	for _, p := range r.unreadable {
		fmt.Fprintln(w, "CANNOT PLACE MARKS:", p)
	}
	if strict {
		ok = ok && len(r.unreadable) == 0 && total.unAdded+total.unRemoved == 0
		for _, m := range r.mirrors {
			if ua, ud := m.unmarkedCounts(); ua+ud > 0 {
				fmt.Fprintf(w, "UNMARKED: %s:%d: %s has %d added and %d removed lines no mark covers:\n", m.path, m.line, m.name, ua, ud)
				for k, l := range m.diff {
					if m.unmarked[k] {
						fmt.Fprintf(w, "  %c%s\n", l.op, l.text)
					}
				}
			}
		}
	}
	return ok
}

// unmarkedCounts returns the number of added and removed lines of m's diff no mark covers.
func (m *mirror) unmarkedCounts() (added, removed int) {
	for k, l := range m.diff {
		if k < len(m.unmarked) && m.unmarked[k] {
			if l.op == '+' {
				added++
			} else {
				removed++
			}
		}
	}
	return added, removed
}

func joinOriginals(os []original) string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = o.String()
	}
	return strings.Join(s, " and ")
}
