// Package v1alpha1 holds the banlieue.io/v1alpha1 API: the kinds a user declares (VirtualMachine,
// VMClass, VMImage, VirtualMachinePool, VirtualMachineClaim) and the kinds an administrator
// declares to register hypervisor hosts (Provider, ProviderClass).
//
// +kubebuilder:object:generate=true
// +groupName=banlieue.io
package v1alpha1
