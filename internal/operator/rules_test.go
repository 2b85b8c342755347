package operator

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func rule(groups, resources, verbs, names []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
}

var (
	core       = []string{""}
	get        = []string{"get"}
	lease      = []string{"coordination.k8s.io"}
	eventsRule = rule([]string{"", "events.k8s.io"}, []string{"events"}, []string{"create", "patch"}, nil)
)

func withCA(ca *banlieuev1.CABundleSource) *banlieuev1.Provider {
	p := guideProvider()
	p.Spec.Connection.CABundle = ca
	return p
}

func TestRoleRules(t *testing.T) {
	const wl = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	leases := []rbacv1.PolicyRule{
		rule(lease, []string{"leases"}, []string{"create"}, nil),
		rule(lease, []string{"leases"}, []string{"get", "update", "patch"}, []string{wl}),
	}
	tests := []struct {
		name string
		p    *banlieuev1.Provider
		want []rbacv1.PolicyRule
	}{
		{"CA ConfigMap", guideProvider(), append(append([]rbacv1.PolicyRule{
			rule(core, []string{"secrets"}, get, []string{"libvirt-edge-creds"}),
			rule(core, []string{"configmaps"}, get, []string{"libvirt-edge-ca"}),
		}, leases...), eventsRule)},
		{"CA Secret", withCA(&banlieuev1.CABundleSource{SecretRef: &banlieuev1.KeySelector{Name: "ca"}}), append(append([]rbacv1.PolicyRule{
			rule(core, []string{"secrets"}, get, []string{"libvirt-edge-creds", "ca"}),
		}, leases...), eventsRule)},
		{"CA in the credentials Secret", withCA(&banlieuev1.CABundleSource{SecretRef: &banlieuev1.KeySelector{Name: "libvirt-edge-creds"}}), append(append([]rbacv1.PolicyRule{
			rule(core, []string{"secrets"}, get, []string{"libvirt-edge-creds"}),
		}, leases...), eventsRule)},
		{"inline CA", withCA(&banlieuev1.CABundleSource{Inline: "PEM"}), append(append([]rbacv1.PolicyRule{
			rule(core, []string{"secrets"}, get, []string{"libvirt-edge-creds"}),
		}, leases...), eventsRule)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := roleRules(tt.p, libvirtClass())
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("roleRules:\n got %+v\nwant %+v", got, tt.want)
			}
			assertNamedWhereScoped(t, got)
		})
	}
}

func TestImportRoleRules(t *testing.T) {
	provider := rule([]string{"banlieue.io"}, []string{"providers"}, get, []string{"libvirt-edge-host-7"})
	creds := rule(core, []string{"secrets"}, get, []string{"libvirt-edge-creds"})
	tests := []struct {
		name string
		p    *banlieuev1.Provider
		want []rbacv1.PolicyRule
	}{
		{"CA ConfigMap", guideProvider(), []rbacv1.PolicyRule{provider, creds,
			rule(core, []string{"configmaps"}, get, []string{"libvirt-edge-ca"})}},
		{"CA Secret", withCA(&banlieuev1.CABundleSource{SecretRef: &banlieuev1.KeySelector{Name: "ca"}}), []rbacv1.PolicyRule{provider, creds,
			rule(core, []string{"secrets"}, get, []string{"ca"})}},
		{"CA in the credentials Secret", withCA(&banlieuev1.CABundleSource{SecretRef: &banlieuev1.KeySelector{Name: "libvirt-edge-creds"}}),
			[]rbacv1.PolicyRule{provider, creds}},
		{"no CA", withCA(nil), []rbacv1.PolicyRule{provider, creds}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := importRoleRules(tt.p)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("importRoleRules:\n got %+v\nwant %+v", got, tt.want)
			}
			for _, r := range got {
				if len(r.ResourceNames) == 0 {
					t.Errorf("import rule without resourceNames grants every object: %+v", r)
				}
			}
		})
	}
}

// assertNamedWhereScoped: every get on secrets, configmaps or providers names its objects.
func assertNamedWhereScoped(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		for _, res := range r.Resources {
			if (res == "secrets" || res == "configmaps" || res == "providers") && len(r.ResourceNames) == 0 {
				t.Errorf("rule on %s without resourceNames: %+v", res, r)
			}
		}
	}
}
