package main

import (
	"go/parser"
	"go/token"
	"testing"
)

func TestNames(t *testing.T) {
	declared := map[string]map[string]bool{
		module + "/pkg/budget": {"Ledger": true},
		module + "/pkg/policy": {"BudgetOf": true},
	}
	cases := map[string]struct {
		pkg, src string
		want     bool
	}{
		"qualified through an import": {pkg: module + "/pkg/manager",
			src: `package manager; import "` + module + `/pkg/budget"; var l budget.Ledger`, want: true},
		"renamed import": {pkg: module + "/pkg/manager",
			src: `package manager; import b "` + module + `/pkg/budget"; var l b.Ledger`, want: true},
		"same package, unqualified": {pkg: module + "/pkg/policy",
			src: `package policy; func f() { _ = BudgetOf }`, want: true},
		"a field of the same name": {pkg: module + "/pkg/policy",
			src: `package policy; type s struct{ x int }; func f(v struct{ BudgetOf int }) { _ = v.BudgetOf }`},
		"a key of the same name in a literal": {pkg: module + "/pkg/policy",
			src: `package policy; type s struct{ BudgetOf int }; var _ = s{BudgetOf: 1}`},
		"another package's identifier of the same name": {pkg: module + "/pkg/manager",
			src: `package manager; import "other/budget"; var l budget.Ledger`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", tc.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			fl := &file{pkg: tc.pkg, ast: f, imports: map[string]string{}}
			for _, imp := range f.Imports {
				name := imp.Path.Value[1 : len(imp.Path.Value)-1]
				local := name[len(name)-len("budget"):]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				fl.imports[local] = name
			}
			if got := len(names(fl, declared)) > 0; got != tc.want {
				t.Errorf("names = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInHome(t *testing.T) {
	home := []string{"pkg/policy/budget.go", "pkg/notice/"}
	cases := map[string]bool{
		"pkg/policy/budget.go":     true,
		"pkg/policy/policy.go":     false,
		"pkg/notice/controller.go": true,
		"pkg/notice/sub/x.go":      false,
	}
	for rel, want := range cases {
		if got := inHome(rel, home); got != want {
			t.Errorf("inHome(%s) = %v, want %v", rel, got, want)
		}
	}
}
