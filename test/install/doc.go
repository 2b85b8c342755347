// Package install tests the kustomize install (config/default) against a real API server
// (envtest, RBAC on, no CRDs preinstalled): `kubectl apply --server-side -k config/default`
// must succeed on an empty cluster, the objects must have the shape the docs promise, the pod
// templates must pass the namespaces' Pod Security levels, and each installed ServiceAccount's
// permissions are checked by impersonating it. No kubelet runs, so no pod is ever started.
package install
