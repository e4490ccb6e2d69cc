//go:build tools

// Package tools names what hack/tools.sh builds from this module, so that go.mod and
// go.sum pin them.
package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e_node"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
