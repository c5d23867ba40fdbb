// Command footprint counts, for each feature, the non-test Go files outside the feature's home
// that name one of the exported identifiers its home declares: how far the feature reaches into
// the rest of the code. apis/, the registries and the commands' main packages do not count.
//
// A feature's home is the files and directories listed for it below; as each feature moves into a
// package of its own, its home becomes that package.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const module = "github.com/kueue-timeshare/kueue-timeshare"

// homes are each feature's files and directories (a directory: every file in it).
var homes = []struct {
	feature string
	home    []string
}{
	{"timebased", []string{"pkg/plugins/timebased/", "pkg/scheduler/preemption/turn.go", "pkg/scheduler/preemption/turnholder.go", "cmd/kubectl-timeshare/app/timebased.go"}},
	{"expectedruntime", []string{"pkg/plugins/expectedruntime/"}},
	{"minruntime", []string{"pkg/plugins/minruntime/", "cmd/kubectl-timeshare/app/minruntime.go"}},
	{"toleration", []string{"pkg/plugins/toleration/"}},
	{"notice", []string{"pkg/plugins/notice/", "cmd/kubectl-timeshare/app/notice.go"}},
	{"budget", []string{"pkg/plugins/budget/"}},
}

// notCounted are the files that may name every feature: the registries.
var notCounted = []string{"pkg/plugins/registry.go", "pkg/scheduler/preemption/hooks.go", "cmd/kubectl-timeshare/app/views.go"}

type file struct {
	rel     string
	pkg     string // import path
	ast     *ast.File
	imports map[string]string // local name -> import path
}

func main() {
	max := flag.Int("max", -1, "fail when a feature reaches more files than this (-1: never)")
	list := flag.Bool("list", false, "list the files each feature reaches")
	showNames := flag.Bool("names", false, "with -list, say which of the feature's identifiers each file names")
	flag.Parse()
	files, err := parseTree(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed := false
	fmt.Printf("%-16s %6s  %s\n", "FEATURE", "FILES", "(non-test Go files outside its home naming its exported identifiers)")
	for _, h := range homes {
		reached := footprint(files, h.home)
		fmt.Printf("%-16s %6d\n", h.feature, len(reached))
		if *list {
			for _, r := range reached {
				if *showNames {
					fmt.Printf("    %-48s %s\n", r.rel, strings.Join(r.names, " "))
					continue
				}
				fmt.Printf("    %s\n", r.rel)
			}
		}
		if *max >= 0 && len(reached) > *max {
			failed = true
		}
	}
	if failed {
		fmt.Fprintf(os.Stderr, "some feature reaches more than %d files\n", *max)
		os.Exit(1)
	}
}

// parseTree parses the non-test Go files under pkg/ and cmd/.
func parseTree(root string) ([]*file, error) {
	var out []*file
	fset := token.NewFileSet()
	for _, top := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(p)
			fl := &file{rel: rel, pkg: module + "/" + path.Dir(rel), ast: f, imports: map[string]string{}}
			for _, imp := range f.Imports {
				ip, _ := strconv.Unquote(imp.Path.Value)
				name := path.Base(ip)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				fl.imports[name] = ip
			}
			out = append(out, fl)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func inHome(rel string, home []string) bool {
	return slices.ContainsFunc(home, func(h string) bool {
		return rel == h || (strings.HasSuffix(h, "/") && strings.HasPrefix(rel, h) && !strings.Contains(rel[len(h):], "/"))
	})
}

// reach is one counted file outside a feature's home and the home's identifiers it names.
type reach struct {
	rel   string
	names []string
}

// footprint lists the counted files outside home that name an exported identifier declared in
// home.
func footprint(files []*file, home []string) []reach {
	// declared: import path -> exported top-level names of home's files.
	declared := map[string]map[string]bool{}
	for _, f := range files {
		if !inHome(f.rel, home) {
			continue
		}
		for _, name := range exported(f.ast) {
			if declared[f.pkg] == nil {
				declared[f.pkg] = map[string]bool{}
			}
			declared[f.pkg][name] = true
		}
	}
	var out []reach
	for _, f := range files {
		if inHome(f.rel, home) || slices.Contains(notCounted, f.rel) || isMain(f) {
			continue
		}
		if n := names(f, declared); len(n) > 0 {
			out = append(out, reach{rel: f.rel, names: n})
		}
	}
	return out
}

func isMain(f *file) bool {
	return f.ast.Name.Name == "main"
}

// exported are the exported names f declares at top level (functions, types, vars, consts; not
// methods, which are reached through their types).
func exported(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// names are the identifiers of declared f names, sorted: qualified through an import, or, in the
// same package, unqualified.
func names(f *file, declared map[string]map[string]bool) []string {
	own := declared[f.pkg]
	found := map[string]bool{}
	selected := map[*ast.Ident]bool{}
	ast.Inspect(f.ast, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			selected[n.Sel] = true
			if x, ok := n.X.(*ast.Ident); ok {
				if ip, ok := f.imports[x.Name]; ok && declared[ip][n.Sel.Name] {
					found[n.Sel.Name] = true
				}
			}
		case *ast.Field:
			// A field's or parameter's own name declares it; it names nothing.
			for _, id := range n.Names {
				selected[id] = true
			}
		case *ast.FuncDecl:
			if n.Recv != nil {
				selected[n.Name] = true
			}
		case *ast.KeyValueExpr:
			// A field name in a composite literal is not a reference to a package-level name.
			if k, ok := n.Key.(*ast.Ident); ok {
				selected[k] = true
			}
		case *ast.Ident:
			if own[n.Name] && !selected[n] {
				found[n.Name] = true
			}
		}
		return true
	})
	return slices.Sorted(maps.Keys(found))
}
