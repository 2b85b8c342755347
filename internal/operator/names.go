package operator

import "banlieue.io/banlieue/internal/naming"

// Names of the objects of one Provider's workload (docs/guides/libvirt-provider.md, "5. What
// the operator creates for it").
//
// Every object is named from one workload name, unique over the whole cluster: the
// ClusterRoleBinding is cluster-scoped, the build Role and RoleBinding share the build
// namespace with every other Provider's, and a class's workloadNamespace holds the
// ServiceAccount, Deployment and lease of Providers from many namespaces. Even the Provider's
// own namespace is no refuge for a readable join: class libvirt-gpu with Provider host and class
// libvirt with Provider gpu-host both read banlieue-provider-libvirt-gpu-host. So the name is
// naming.Unique over (class, provider namespace, provider name), and one scheme serves every
// scope (docs/security.md, "Workload names in shared scopes").

// workloadName names every object of the workload: banlieue-provider-<class>-<provider>, cut to
// fit, then "-" and a digest of the identity. It is at most 63 characters, which its use as the
// value of app.kubernetes.io/instance needs.
func workloadName(class, providerNamespace, provider string) string {
	return naming.Unique("banlieue-provider-"+class+"-"+provider, class, providerNamespace, provider)
}

// importName names the Provider's import ServiceAccount, in the build namespace, and the Role
// and RoleBinding that grant it this Provider's credentials. ServiceAccount and Role names allow
// 253 characters, so the suffix goes after the 63-character workload name, and the account is as
// collision-free as the workload name it extends.
func importName(workload string) string {
	return workload + "-import"
}

// ExportAccountName names the Provider's export ServiceAccount, in the build namespace, and the
// Role and RoleBinding that grant it this Provider's credentials, from the workload's name
// (WorkloadName): the export controller runs a Provider's export Jobs as it.
func ExportAccountName(workload string) string {
	return workload + "-export"
}

// WorkloadName is the name of the workload of a Provider under a class (workloadName), for the
// controllers that name its accounts.
func WorkloadName(class, providerNamespace, provider string) string {
	return workloadName(class, providerNamespace, provider)
}

// buildName names the Role and RoleBinding that carry the class's additionalRules into the build
// namespace, where the provider creates its import Jobs.
func buildName(workload string) string {
	return workload + "-build"
}

// providerClusterRole is the shipped ClusterRole of a backend, which the operator only binds.
func providerClusterRole(backend string) string {
	return providerClusterRolePrefix + backend
}
