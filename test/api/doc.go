// Package api holds the admission suite: the CRDs of config/crd/bases installed in a real
// kube-apiserver, every example applied with server-side apply, and every validation rule
// exercised with an object that breaks it.
package api
