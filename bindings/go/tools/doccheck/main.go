// Command doccheck lists the exported names of a Go package folder that
// have no doc comment (test files left out), and exits 1 when there is
// one: stage 57-go runs it over bindings/go, so that `go doc -all` (and
// docs/reference/go-api.md) documents every name.
//
//	go run ./doccheck DIR
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: doccheck DIR")
		os.Exit(2)
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, os.Args[1], func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		panic(err)
	}
	bad := 0
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil {
						fmt.Println("undocumented: func", d.Name.Name)
						bad++
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								fmt.Println("undocumented: type", s.Name.Name)
								bad++
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									fmt.Println("undocumented:", n.Name)
									bad++
								}
							}
						}
					}
				}
			}
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}
