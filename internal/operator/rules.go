package operator

import (
	rbacv1 "k8s.io/api/rbac/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

// Every rule naming objects lists at least one resourceName: an empty list would grant every
// object of the kind in the namespace, so a rule is left out rather than emitted empty.

// caRefs returns the CA ConfigMap and CA Secret names of p, each empty when not used.
func caRefs(p *banlieuev1.Provider) (configMap, secret string) {
	ca := p.Spec.Connection.CABundle
	if ca == nil {
		return "", ""
	}
	if ca.ConfigMapRef != nil {
		configMap = ca.ConfigMapRef.Name
	}
	if ca.SecretRef != nil {
		secret = ca.SecretRef.Name
	}
	return configMap, secret
}

// secretNames are the Secrets a Provider's credentials live in, without duplicates.
func secretNames(p *banlieuev1.Provider) []string {
	names := []string{p.Spec.Connection.CredentialsRef.Name}
	if _, caSecret := caRefs(p); caSecret != "" && caSecret != names[0] {
		names = append(names, caSecret)
	}
	return names
}

// roleRules are the per-instance Role of the provider workload, in the Provider's namespace:
// its credentials by name, its own leader lease and events. Its machines' user-data Secrets are
// granted in each machine's namespace instead (userDataObjects), the Provider's own included, and
// the class's additionalRules in the build namespace (buildName), where the Jobs they are for live.
func roleRules(p *banlieuev1.Provider, class *banlieuev1.ProviderClass) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: secretNames(p)},
	}
	if caCM, _ := caRefs(p); caCM != "" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{caCM}})
	}
	rules = append(rules,
		// create cannot be restricted by name: the name is not known to the authorizer before the
		// object exists.
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "patch"},
			ResourceNames: []string{workloadName(class.Name, p.Namespace, p.Name)}},
		rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	)
	return rules
}

// importRoleRules let the Provider's import Jobs (its own import ServiceAccount, importName, in
// the build namespace) read the Provider and its credentials, by name and nothing else.
func importRoleRules(p *banlieuev1.Provider) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{banlieuev1.GroupVersion.Group}, Resources: []string{"providers"}, Verbs: []string{"get"}, ResourceNames: []string{p.Name}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{p.Spec.Connection.CredentialsRef.Name}},
	}
	caCM, caSecret := caRefs(p)
	if caCM != "" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{caCM}})
	}
	if caSecret != "" && caSecret != p.Spec.Connection.CredentialsRef.Name {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{caSecret}})
	}
	return rules
}
