package role

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/operator"
	"banlieue.io/banlieue/internal/testenv"
	"banlieue.io/banlieue/internal/testenv/labhost"
)

const (
	grantNS       = "banlieue-system"
	grantProvider = "no-jobs"
	operatorSA    = "banlieue-operator"
	grantWait     = 40 * time.Second
)

// TestProviderWithoutTheJobsGrantAgainstLabHost provokes the guide's troubleshooting row
// "Provider gets 403 on Jobs" as a user would: the installed operator, as its ServiceAccount,
// gives a Provider of a ProviderClass without additionalRules its workload; the provider runs
// as that workload's ServiceAccount, with the options the operator gives it, against the lab
// host. Every zone and the row read JobsNotGranted with a message naming the missing rule, and
// the process keeps serving: past the cache sync timeout that used to end it, it still probes
// the host and reports a change to the Provider.
func TestProviderWithoutTheJobsGrantAgainstLabHost(t *testing.T) {
	lab := testenv.RequireLibvirtLab(t)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	host := labhost.Dial(t, lab)
	env.CreateLabNamespace(ctx, t, lab, grantNS, "lab-creds", "lab-ca")
	env.Create(ctx, t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: buildNamespace}})
	testenv.SetLogger(t)

	// The operator as installed: its generated ClusterRole and Roles, bound to its account.
	opRole, opRoles := testenv.GeneratedRoles(t, "config/rbac/operator/role.yaml")
	env.Create(ctx, t, opRole, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: opRole.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: opRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: grantNS}}})
	for i := range opRoles {
		r := &opRoles[i]
		env.Create(ctx, t, r, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: grantNS}}})
	}
	provRole, _ := testenv.GeneratedRoles(t, "config/rbac/provider-libvirt/role.yaml")
	env.Create(ctx, t, provRole)
	oopts := operator.Options{}
	mopts := testenv.ManagerOptions()
	mopts.Cache = operator.CacheOptions(oopts)
	opMgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, testenv.ServiceAccountUser(grantNS, operatorSA)), mopts)
	if err := operator.Setup(opMgr, oopts); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, opMgr)

	// The guide's ProviderClass without its additionalRules.
	var class banlieuev1.ProviderClass
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "09-providerclass-libvirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &class); err != nil {
		t.Fatal(err)
	}
	class.Spec.AdditionalRules = nil
	env.Create(ctx, t, &class)

	pool := labhost.CreatePool(ctx, t, host, lab, "nojobs-"+testenv.RunID())
	p := lab.Provider(grantNS, grantProvider, "lab-creds", "lab-ca", banlieuev1.ProviderCapabilities{
		StorageClasses: []banlieuev1.StorageClassMapping{{Name: "standard", Target: map[string]string{"pool": pool.Name}}}})
	env.Create(ctx, t, p)
	var workload string
	testenv.Eventually(t, grantWait, "the operator applies the Provider's workload", func() error {
		var got banlieuev1.Provider
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)
		if err == nil && got.Status.Workload != nil {
			workload = got.Status.Workload.DeploymentName
		}
		return testenv.Unmet(workload != "", fmt.Sprintf("status %+v (%v)", got.Status, err))
	})
	testenv.Eventually(t, grantWait, "the workload's ServiceAccount", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: grantNS, Name: workload}, &corev1.ServiceAccount{})
	})

	// The image's artifact is published before the provider starts, as the imagebuilder would.
	img := &banlieuev1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "nojobs"}, Spec: banlieuev1.VMImageSpec{
		OSFamily: "linux", OSDistribution: "debian", OSVersion: "12", Architecture: "amd64",
		Sources: []banlieuev1.ImageSource{{ProviderClass: "libvirt", Kind: banlieuev1.SourceURL, ImportFrom: "https://images.example/nojobs.raw"}}}}
	env.Create(ctx, t, img)
	img.Status.BuildArtifact = &banlieuev1.BuildArtifact{Kind: banlieuev1.ArtifactCloudImage, Phase: banlieuev1.BuildReady,
		Reason: banlieuev1.ReasonReconciled, File: "nojobs.raw", Checksum: "sha256:" + strings.Repeat("ab", 32),
		PVCRef: &banlieuev1.LocalObjectReference{Name: "banlieue-artifacts"}}
	if err := env.Client.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}

	// The provider as the operator runs it: its Provider's name and namespace, the class's
	// image for its imports, the workload's import account; as the workload's ServiceAccount.
	opts := Options{ProviderName: grantProvider, ProviderNamespace: grantNS, BuildNamespace: buildNamespace,
		ImportImage: class.Spec.Image.Repository + ":" + class.Spec.Image.Tag, ImportServiceAccount: workload + "-import",
		Resync: 2 * time.Second}
	popts := testenv.ManagerOptions()
	popts.Cache.DefaultNamespaces = map[string]cache.Config{grantNS: {}}
	popts.Cache.ByObject = CacheByObject(opts)
	popts.Controller.CacheSyncTimeout = cacheSyncTimeout
	provMgr := testenv.NewManagerWith(t, testenv.Impersonating(env.Config, testenv.ServiceAccountUser(grantNS, workload)), popts)
	if err := Setup(provMgr, opts); err != nil {
		t.Fatal(err)
	}
	stop := testenv.StartManager(t, provMgr)

	wantMessage := []string{
		"this provider may not read import Job " + buildNamespace + "/import-nojobs-",
		"ProviderClass libvirt lacks the additionalRules that grant batch/jobs get, list, watch, create and delete in namespace " + buildNamespace,
		"examples/09-providerclass-libvirt.yaml",
		`cannot get resource "jobs" in API group "batch" in the namespace "` + buildNamespace + `"`,
	}
	t.Run("the row and its zone read JobsNotGranted, naming the missing rule", func(t *testing.T) {
		testenv.Eventually(t, grantWait, "row JobsNotGranted", func() error {
			var got banlieuev1.VMImage
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(img), &got); err != nil {
				return err
			}
			if len(got.Status.PerProvider) != 1 || len(got.Status.PerProvider[0].Zones) != 1 {
				return fmt.Errorf("rows %+v", got.Status.PerProvider)
			}
			row, zone := got.Status.PerProvider[0], got.Status.PerProvider[0].Zones[0]
			if row.Reason != banlieuev1.ReasonJobsNotGranted || zone.Reason != banlieuev1.ReasonJobsNotGranted || zone.Name != pool.Name ||
				row.Message != zone.Message {
				return fmt.Errorf("row %+v", row)
			}
			for _, part := range wantMessage {
				if !strings.Contains(zone.Message, part) {
					return fmt.Errorf("zone message %q lacks %q", zone.Message, part)
				}
			}
			return nil
		})
	})
	t.Run("a Warning event says so", func(t *testing.T) {
		testenv.Eventually(t, grantWait, "event JobsNotGranted", func() error {
			for _, e := range testenv.EventsAbout(ctx, t, env.Client, "default", img.Name) {
				if e.Reason == banlieuev1.ReasonJobsNotGranted && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, wantMessage[1]) {
					return nil
				}
			}
			return fmt.Errorf("no JobsNotGranted event")
		})
	})
	t.Run("the process keeps probing the host past the cache sync timeout", func(t *testing.T) {
		time.Sleep(2 * cacheSyncTimeout)
		var got banlieuev1.Provider
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		got.Spec.Capabilities.StorageClasses = append(got.Spec.Capabilities.StorageClasses,
			banlieuev1.StorageClassMapping{Name: "gold", Target: map[string]string{"pool": "absent-" + testenv.RunID()}})
		if err := env.Client.Update(ctx, &got); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, grantWait, "the Provider's probe reports the declared pool the host lacks", func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				return err
			}
			reachable := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionProviderReachable)
			ready := meta.FindStatusCondition(got.Status.Conditions, banlieuev1.ConditionReady)
			ok := reachable != nil && reachable.Status == metav1.ConditionTrue && ready != nil && ready.Status == metav1.ConditionFalse &&
				ready.Reason == banlieuev1.ReasonCapabilitiesIncomplete && ready.ObservedGeneration == got.Generation &&
				strings.Contains(ready.Message, "gold")
			return testenv.Unmet(ok, fmt.Sprintf("conditions %+v", got.Status.Conditions))
		})
	})
	if err := stop(); err != nil {
		t.Errorf("the provider stopped on its own: %v", err)
	}
}
