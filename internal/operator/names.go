package operator

import "banlieue.io/banlieue/internal/naming"

// Names of the objects of one Provider's workload (docs/guides/libvirt-provider.md, "5. What the operator creates for it"). Every name is capped at 63
// characters because the workload name is also the value of app.kubernetes.io/instance.

// workloadName names the namespaced objects: banlieue-provider-<class>-<provider>.
func workloadName(class, provider string) string {
	return naming.Capped("banlieue-provider-" + class + "-" + provider)
}

// clusterScopedName names the ClusterRoleBinding; it carries the Provider's namespace because
// two Providers of the same name in different namespaces share the cluster scope.
func clusterScopedName(class, providerNamespace, provider string) string {
	return naming.Capped("banlieue-provider-" + class + "-" + providerNamespace + "-" + provider)
}

// importName names the Role and RoleBinding granted to the import Jobs. The suffix is added after
// capping, as docs/guides/libvirt-provider.md ("5. What the operator creates for it") spells it
// (<workloadName>-import); Role names allow 253 characters.
func importName(workload string) string {
	return workload + "-import"
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
