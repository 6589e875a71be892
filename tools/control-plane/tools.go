//go:build tools

// Package tools pins the control-plane commands built by `make control-plane`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
