//go:build tools

// Package tools names what hack/tools.sh builds from this module, so that go.mod and
// go.sum pin them.
package tools

import (
	_ "github.com/coredns/coredns"
)
