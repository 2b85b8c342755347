// Package capi is what banlieue reads of Cluster API's objects (the v1beta2 contract): the Machine
// that owns a LibvirtMachine, its bootstrap data Secret, and whether its Cluster is paused. It
// reads them as unstructured objects, by name, past the cache: banlieue does not import Cluster
// API's module, and its roles hold get on these kinds, never list or watch
// (docs/adr/0136-cluster-api-machines.md).
package capi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster API's names, as its v1beta2 contract defines them.
const (
	// Group is Cluster API's core API group.
	Group = "cluster.x-k8s.io"
	// AnnotationPaused on an infrastructure object stops its reconciliation.
	AnnotationPaused = "cluster.x-k8s.io/paused"
	// LabelClusterName names the Cluster an object belongs to.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelControlPlane marks a control plane's machines.
	LabelControlPlane = "cluster.x-k8s.io/control-plane"
	// SecretTypeBootstrap is the type bootstrap providers give their data Secrets.
	SecretTypeBootstrap corev1.SecretType = "cluster.x-k8s.io/secret"
	// KeyBootstrapData holds the bootstrap data in that Secret; KeyBootstrapFormat its format.
	KeyBootstrapData   = "value"
	KeyBootstrapFormat = "format"
	// FormatCloudConfig is the only bootstrap format a NoCloud seed carries.
	FormatCloudConfig = "cloud-config"
)

var (
	machineGVK = schema.GroupVersionKind{Group: Group, Version: "v1beta2", Kind: "Machine"}
	clusterGVK = schema.GroupVersionKind{Group: Group, Version: "v1beta2", Kind: "Cluster"}
)

// OwnerMachine is the controller reference of o to a Cluster API Machine, nil when o has none:
// a LibvirtMachine with one is served as the contract asks, one without as banlieue's own.
func OwnerMachine(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != "Machine" {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != Group {
		return nil
	}
	return ref
}

// Managed reports whether o has an owner reference into Cluster API's group: a MachineSet or a
// control plane creates a LibvirtMachine owned by itself, and the Machine takes it over as its
// controller only later.
func Managed(o metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == Group {
			return true
		}
	}
	return false
}

// Machine is what banlieue reads of a Cluster API Machine.
type Machine struct {
	Name        string
	ClusterName string
	// DataSecretName is spec.bootstrap.dataSecretName, empty until the bootstrap provider wrote it.
	DataSecretName string
	// FailureDomain is spec.failureDomain, empty when the Machine asks for none.
	FailureDomain string
}

// ReadMachine reads the Machine ref names, in ns, and checks that it is the one ref means (its
// UID) and that its spec.infrastructureRef names infra (group, kind and name): whoever may write
// a LibvirtMachine can give it any owner reference, and must not borrow another machine's
// bootstrap data by it. A Machine that is gone, or a cluster without Cluster API's CRDs, is an
// error that says so.
func ReadMachine(ctx context.Context, r client.Reader, ns string, ref *metav1.OwnerReference, infra client.Object, infraGVK schema.GroupVersionKind) (*Machine, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machineGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("owner Machine %s/%s: not found: %w", ns, ref.Name, err)
		}
		return nil, fmt.Errorf("reading owner Machine %s/%s: %w", ns, ref.Name, err)
	}
	if u.GetUID() != ref.UID {
		return nil, fmt.Errorf("owner Machine %s/%s has uid %s, not the owner reference's %s", ns, ref.Name, u.GetUID(), ref.UID)
	}
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(u.Object, path...); return s }
	group, kind, name := str("spec", "infrastructureRef", "apiGroup"), str("spec", "infrastructureRef", "kind"), str("spec", "infrastructureRef", "name")
	if group != infraGVK.Group || kind != infraGVK.Kind || name != infra.GetName() {
		return nil, fmt.Errorf("owner Machine %s/%s: spec.infrastructureRef names %s %s/%s, not this %s", ns, ref.Name, kind, group, name, infraGVK.Kind)
	}
	return &Machine{
		Name:           u.GetName(),
		ClusterName:    str("spec", "clusterName"),
		DataSecretName: str("spec", "bootstrap", "dataSecretName"),
		FailureDomain:  str("spec", "failureDomain"),
	}, nil
}

// ClusterPaused reports whether the Cluster ns/name has spec.paused set.
func ClusterPaused(ctx context.Context, r client.Reader, ns, name string) (bool, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return false, fmt.Errorf("reading Cluster %s/%s: %w", ns, name, err)
	}
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	return paused, nil
}

// ClusterInfrastructure is the spec.infrastructureRef of the Cluster ns/name: its API group,
// kind and name (empty while the Cluster names none).
func ClusterInfrastructure(ctx context.Context, r client.Reader, ns, name string) (group, kind, infraName string, err error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return "", "", "", fmt.Errorf("reading Cluster %s/%s: %w", ns, name, err)
	}
	str := func(field string) string {
		s, _, _ := unstructured.NestedString(u.Object, "spec", "infrastructureRef", field)
		return s
	}
	return str("apiGroup"), str("kind"), str("name"), nil
}

// Paused reports whether o carries the paused annotation (any value, as Cluster API reads it).
func Paused(o metav1.Object) bool {
	_, ok := o.GetAnnotations()[AnnotationPaused]
	return ok
}

// PausedWhy reports whether an infrastructure machine o (of kind, e.g. "LibvirtMachine") is
// paused, by its own annotation or by its Cluster clusterName's spec.paused (empty: no Cluster
// is read), and why, as the machine's Paused condition says it. A Cluster gone while the
// machine is being deleted pauses nothing.
func PausedWhy(ctx context.Context, r client.Reader, o metav1.Object, kind, clusterName string, deleting bool) (bool, string, error) {
	if Paused(o) {
		return true, "the " + kind + " has the " + AnnotationPaused + " annotation", nil
	}
	if clusterName == "" {
		return false, "", nil
	}
	p, err := ClusterPaused(ctx, r, o.GetNamespace(), clusterName)
	if err != nil && !(deleting && apierrors.IsNotFound(err)) {
		return false, "", fmt.Errorf("checking whether the Machine's Cluster is paused: %w", err)
	}
	return p, "Cluster " + clusterName + " has spec.paused", nil
}

// CheckBootstrapSecret refuses a Secret that is not a bootstrap provider's data Secret for the
// cluster clusterName: its type (immutable once created) and its cluster label. Only such a Secret
// is granted to a provider or read into a seed, so a Machine naming another Secret (a Provider's
// credentials) gains nothing. Its messages never quote the content.
func CheckBootstrapSecret(s *corev1.Secret, clusterName string) error {
	if s.Type != SecretTypeBootstrap {
		return fmt.Errorf("bootstrap data Secret %s/%s has type %q, not a bootstrap data Secret's %q; it is not used", s.Namespace, s.Name, s.Type, SecretTypeBootstrap)
	}
	if got := s.Labels[LabelClusterName]; got != clusterName {
		return fmt.Errorf("bootstrap data Secret %s/%s has %s=%q, not the Machine's cluster %q; it is not used", s.Namespace, s.Name, LabelClusterName, got, clusterName)
	}
	if f := string(s.Data[KeyBootstrapFormat]); f != "" && f != FormatCloudConfig {
		return fmt.Errorf("bootstrap data Secret %s/%s holds data of format %q; a NoCloud seed carries %q only", s.Namespace, s.Name, f, FormatCloudConfig)
	}
	if _, ok := s.Data[KeyBootstrapData]; !ok {
		return fmt.Errorf("bootstrap data Secret %s/%s has no key %q", s.Namespace, s.Name, KeyBootstrapData)
	}
	return nil
}
