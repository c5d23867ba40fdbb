package main

import (
	"go/ast"
	"go/scanner"
	"go/token"
	"strings"
)

// isMark reports whether comment c marks an addition of ours.
func isMark(c *ast.Comment) bool {
	return strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(c.Text, "//")), addition)
}

// coveredLines returns the source lines of fd that a mark covers: the statement (or composite
// literal element, or call argument) that follows a mark, the one a mark trails on its last line,
// and the signature when the doc comment's last line is a mark. comments are the file's.
func coveredLines(fset *token.FileSet, fd *ast.FuncDecl, comments []*ast.CommentGroup) map[int]bool {
	covered := map[int]bool{}
	cover := func(from, to token.Pos) {
		for l := fset.Position(from).Line; l <= fset.Position(to).Line; l++ {
			covered[l] = true
		}
	}
	if fd.Doc != nil && isMark(fd.Doc.List[len(fd.Doc.List)-1]) && fd.Body != nil {
		cover(fd.Pos(), fd.Body.Lbrace)
	}
	if fd.Body == nil {
		return covered
	}
	// The nodes a mark can cover, outermost first at equal positions (ast.Inspect's order).
	var nodes []ast.Node
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BlockStmt:
			// A block is covered with the statement it belongs to.
		case ast.Stmt:
			nodes = append(nodes, x)
		case *ast.CompositeLit:
			for _, e := range x.Elts {
				nodes = append(nodes, e)
			}
		case *ast.CallExpr:
			for _, e := range x.Args {
				nodes = append(nodes, e)
			}
		}
		return true
	})
	for _, cg := range comments {
		if cg.Pos() < fd.Body.Lbrace || cg.End() > fd.Body.Rbrace {
			continue
		}
		for _, c := range cg.List {
			if !isMark(c) {
				continue
			}
			line := fset.Position(c.Pos()).Line
			// A trailing mark: the outermost node that ends on its line before it.
			var trailed ast.Node
			for _, n := range nodes {
				if n.End() <= c.Pos() && fset.Position(n.End()).Line == line &&
					(trailed == nil || n.Pos() < trailed.Pos()) {
					trailed = n
				}
			}
			if trailed != nil {
				cover(trailed.Pos(), trailed.End())
				continue
			}
			// Otherwise the first node after the comment group, the outermost at that position.
			var next ast.Node
			for _, n := range nodes {
				if n.Pos() >= cg.End() && (next == nil || n.Pos() < next.Pos()) {
					next = n
				}
			}
			if next != nil {
				cover(next.Pos(), next.End())
			}
		}
	}
	return covered
}

// codeLines returns, for each line printFunc prints of fd, the source line it comes from: the
// printer keeps gofmt-formatted source's line breaks, and printFunc drops comments and blank
// lines (even inside a raw string), so the printed lines are the source lines with code on them,
// in order.
func codeLines(fset *token.FileSet, fd *ast.FuncDecl, src []byte) []int {
	tf := fset.File(fd.Pos())
	from, to := tf.Offset(fd.Pos()), tf.Offset(fd.End())
	var s scanner.Scanner
	sf := token.NewFileSet().AddFile("", -1, to-from)
	s.Init(sf, src[from:to], nil, 0)
	base := fset.Position(fd.Pos()).Line - 1
	var out []int
	last := 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		start := sf.Position(pos).Line
		// A token over several lines (a raw string) prints those of its lines that are not blank.
		for k, part := range strings.Split(lit, "\n") {
			if l := start + k; l > last && (k == 0 || strings.TrimSpace(part) != "") {
				out = append(out, base+l)
				last = l
			}
		}
	}
	return out
}

// unmarkedLines marks in d the lines no mark covers: a '+' line whose source line is not covered,
// and a '-' line in a run of changes without a covered '+' line (what a marked statement replaces).
// src maps each of our printed lines to its source line; covered are the covered source lines.
func unmarkedLines(d []diffLine, src []int, covered map[int]bool) []bool {
	out := make([]bool, len(d))
	j := 0
	plus := make([]bool, len(d)) // covered '+' lines
	for k, l := range d {
		if l.op == '-' {
			continue
		}
		if l.op == '+' && j < len(src) && covered[src[j]] {
			plus[k] = true
		}
		j++
	}
	for k := 0; k < len(d); {
		if d[k].op == ' ' {
			k++
			continue
		}
		end := k
		marked := false
		for end < len(d) && d[end].op != ' ' {
			marked = marked || plus[end]
			end++
		}
		for i := k; i < end; i++ {
			switch d[i].op {
			case '+':
				out[i] = !plus[i]
			case '-':
				out[i] = !marked
			}
		}
		k = end
	}
	return out
}
