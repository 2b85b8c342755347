package operator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestWorkloadObjects(t *testing.T) {
	p := guideProvider()
	const wl = "banlieue-provider-libvirt-libvirt-edge-host-7-6f5aeeba6513f8e3"
	wantLabels := map[string]string{
		"app.kubernetes.io/name":         "banlieue",
		"banlieue.io/provider":           "libvirt-edge-host-7",
		"banlieue.io/provider-namespace": "banlieue-system",
		"banlieue.io/provider-class":     "libvirt",
		"app.kubernetes.io/component":    "provider-libvirt",
		"app.kubernetes.io/managed-by":   "banlieue-operator",
		"app.kubernetes.io/instance":     wl,
	}
	owner := []metav1.OwnerReference{{APIVersion: "banlieue.io/v1alpha1", Kind: "Provider", Name: p.Name, UID: p.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	tests := []struct {
		name              string
		workloadNamespace string
		wantNs            string
		wantOwnedWorkload bool
	}{
		{"in the Provider's namespace", "", "banlieue-system", true},
		{"in the class's workloadNamespace", "providers", "providers", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class := libvirtClass()
			class.Spec.WorkloadNamespace = tt.workloadNamespace
			w := desiredWorkload(p, class, Options{BuildNamespace: "banlieue-imagebuild"}, nil)

			type meta struct {
				kind, ns, name string
				owned          bool
			}
			var got []meta
			for _, o := range w.objects() {
				m := decode[metav1.PartialObjectMetadata](t, o)
				if !reflect.DeepEqual(m.Labels, wantLabels) {
					t.Errorf("%s %s labels %v", *o.GetKind(), m.Name, m.Labels)
				}
				if want := map[string]string{"banlieue.io/provider": "banlieue-system/libvirt-edge-host-7"}; !reflect.DeepEqual(m.Annotations, want) {
					t.Errorf("%s %s annotations %v", *o.GetKind(), m.Name, m.Annotations)
				}
				if len(m.OwnerReferences) > 0 && !reflect.DeepEqual(m.OwnerReferences, owner) {
					t.Errorf("%s %s ownerReferences %+v", *o.GetKind(), m.Name, m.OwnerReferences)
				}
				got = append(got, meta{*o.GetKind(), m.Namespace, m.Name, len(m.OwnerReferences) > 0})
			}
			want := []meta{
				{"ServiceAccount", tt.wantNs, wl, tt.wantOwnedWorkload},
				{"ServiceAccount", "banlieue-imagebuild", wl + "-import", false},
				{"Role", "banlieue-system", wl, true},
				{"RoleBinding", "banlieue-system", wl, true},
				{"Role", "banlieue-system", wl + "-import", true},
				{"RoleBinding", "banlieue-system", wl + "-import", true},
				{"ServiceAccount", "banlieue-imagebuild", wl + "-export", false},
				{"Role", "banlieue-system", wl + "-export", true},
				{"RoleBinding", "banlieue-system", wl + "-export", true},
				{"Role", "banlieue-imagebuild", wl + "-build", false},
				{"RoleBinding", "banlieue-imagebuild", wl + "-build", false},
				{"ClusterRoleBinding", "", wl, false},
				{"Service", tt.wantNs, wl, tt.wantOwnedWorkload},
				{"Deployment", tt.wantNs, wl, tt.wantOwnedWorkload},
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("objects\n got %+v\nwant %+v", got, want)
			}

			sa := rbacv1.Subject{Kind: "ServiceAccount", Name: wl, Namespace: tt.wantNs}
			rb := decode[rbacv1.RoleBinding](t, w.roleBinding)
			if !reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{sa}) || rb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: wl}) {
				t.Errorf("RoleBinding %+v %+v", rb.Subjects, rb.RoleRef)
			}
			irb := decode[rbacv1.RoleBinding](t, w.importRoleBinding)
			if !reflect.DeepEqual(irb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: wl + "-import", Namespace: "banlieue-imagebuild"}}) ||
				irb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: wl + "-import"}) {
				t.Errorf("import RoleBinding %+v %+v", irb.Subjects, irb.RoleRef)
			}
			erb := decode[rbacv1.RoleBinding](t, w.exportRoleBinding)
			if !reflect.DeepEqual(erb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: wl + "-export", Namespace: "banlieue-imagebuild"}}) ||
				erb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: wl + "-export"}) {
				t.Errorf("export RoleBinding %+v %+v", erb.Subjects, erb.RoleRef)
			}
			if er := decode[rbacv1.Role](t, w.exportRole); !reflect.DeepEqual(er.Rules, importRoleRules(p)) {
				t.Errorf("export Role rules %+v, want the Provider and its credentials by name alone: %+v", er.Rules, importRoleRules(p))
			}
			br := decode[rbacv1.Role](t, w.buildRole)
			brb := decode[rbacv1.RoleBinding](t, w.buildRoleBinding)
			if !reflect.DeepEqual(br.Rules, RBACRules(libvirtClass().Spec.AdditionalRules)) ||
				!reflect.DeepEqual(brb.Subjects, []rbacv1.Subject{sa}) ||
				brb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: wl + "-build"}) {
				t.Errorf("build Role %+v, binding %+v %+v: the class's additionalRules belong in the build namespace", br.Rules, brb.Subjects, brb.RoleRef)
			}
			crb := decode[rbacv1.ClusterRoleBinding](t, w.clusterRoleBinding)
			if !reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{sa}) ||
				crb.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "banlieue-provider-libvirt"}) {
				t.Errorf("ClusterRoleBinding %+v %+v", crb.Subjects, crb.RoleRef)
			}
			svc := decode[corev1.Service](t, w.service)
			if !reflect.DeepEqual(svc.Spec.Selector, selectorLabels(p, class)) || len(svc.Spec.Ports) != 1 ||
				svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("console") {
				t.Errorf("console Service %+v: the relay reaches the provider pods' console port through it", svc.Spec)
			}
			if len(keepSet(w)) != 14 {
				t.Errorf("keep set %v", keepSet(w))
			}
		})
	}
}

func TestPausedObject(t *testing.T) {
	p, class := guideProvider(), libvirtClass()
	if got := pausedObject(p, class); got != "" {
		t.Errorf("nothing paused, got %q", got)
	}
	class.Spec.Paused = true
	if got := pausedObject(p, class); got != "ProviderClass libvirt" {
		t.Errorf("paused class, got %q", got)
	}
	p.Spec.Paused = true
	if got := pausedObject(p, class); got != "Provider banlieue-system/libvirt-edge-host-7" {
		t.Errorf("paused provider, got %q", got)
	}
}

func TestTolerationFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    corev1.Toleration
		wantErr bool
	}{
		{in: "dedicated:NoSchedule", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated=build:NoExecute", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "build", Effect: corev1.TaintEffectNoExecute}},
		{in: "example.com/gpu=true:PreferNoSchedule", want: corev1.Toleration{Key: "example.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}},
		{in: "dedicated", wantErr: true},
		{in: "dedicated:Sometimes", wantErr: true},
		{in: ":NoSchedule", wantErr: true},
		{in: "bad key:NoSchedule", wantErr: true},
		{in: "k=bad value:NoSchedule", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseToleration(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseToleration(%q) error %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want {
				t.Errorf("ParseToleration(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if back := FormatToleration(got); back != tt.in {
				t.Errorf("FormatToleration round trip: %q, want %q", back, tt.in)
			}
		})
	}
}
