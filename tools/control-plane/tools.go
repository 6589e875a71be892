//go:build tools

// Package tools pins the control-plane commands built by `make control-plane`: the
// loopback tier's kube-apiserver and kubectl, and the node tier's kubelet,
// kube-controller-manager, kube-scheduler and kube-proxy, all from one k8s.io/kubernetes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
