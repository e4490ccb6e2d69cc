// Command kindconst prints a constant of kind's node image build (package
// sigs.k8s.io/kind/pkg/build/nodeimage) as kind v0.33.0 defines it: the default CNI and
// storage manifests and the images they name. hack/kind/node-image.sh writes them into the
// node image as `kind build node-image` does, from the pinned module rather than a copy.
//
//	kindconst KIND_MODULE_DIR NAME
package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: kindconst KIND_MODULE_DIR NAME")
		os.Exit(2)
	}
	value, err := lookup(filepath.Join(os.Args[1], "pkg/build/nodeimage"), os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindconst:", err)
		os.Exit(1)
	}
	fmt.Print(value)
}

// lookup type-checks the package's const_*.go files (they import nothing) and returns the
// string value of the named constant, its concatenations evaluated.
func lookup(dir, name string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "const_*.go"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no const_*.go in %s", dir)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return "", err
		}
		parsed = append(parsed, file)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("nodeimage", fset, parsed, nil)
	if err != nil {
		return "", fmt.Errorf("type-checking %s: %w", dir, err)
	}
	obj, ok := pkg.Scope().Lookup(name).(*types.Const)
	if !ok {
		return "", fmt.Errorf("%s is not a constant of %s", name, dir)
	}
	if obj.Val().Kind() != constant.String {
		return "", fmt.Errorf("%s is not a string constant", name)
	}
	return constant.StringVal(obj.Val()), nil
}
