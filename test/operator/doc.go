// Package operator tests banlieue-operator against a real API server (envtest) with RBAC on:
// the operator runs as a subject holding only the generated banlieue-operator ClusterRole, and
// the permissions it grants are checked by impersonating the subjects it grants them to.
package operator
