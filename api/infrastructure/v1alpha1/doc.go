// Package v1alpha1 holds the infrastructure.banlieue.io/v1alpha1 API: the per-backend machine
// kinds (LibvirtMachine) through which banlieue-controller and a provider meet. They follow the
// Cluster API v1beta2 InfraMachine contract, so a CAPI Machine can use them unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.banlieue.io
package v1alpha1
