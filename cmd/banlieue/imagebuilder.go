package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/app"
	"banlieue.io/banlieue/internal/imagebuilder"
	"banlieue.io/banlieue/internal/imagebuilder/build"
	"banlieue.io/banlieue/internal/jobbounds"
	"banlieue.io/banlieue/internal/jobimage"
	"banlieue.io/banlieue/internal/operator"
)

// newImagebuilderCommand is `banlieue imagebuilder` (docs/operations.md, "Role-specific flags") and its one-shot `build`.
func newImagebuilderCommand() *cobra.Command {
	var (
		buildNamespace, buildImage, artifactsPVC string
		caConfigMap                              string
		pull                                     jobimage.Pull
		selectorFlags, tolerationFlags           []string
		nodeSelector                             map[string]string
		tolerations                              []corev1.Toleration
		limits                                   = build.DefaultLimits()
		bounds                                   = jobbounds.DefaultBuild()
	)
	r := &role{name: "imagebuilder", leaderElectionID: "banlieue-imagebuilder", defaultWorkers: imagebuilder.DefaultWorkers}
	r.customize = func(o *manager.Options, _ app.Options) {
		// Only build Jobs, only in the build namespace, are worth caching. Build Secrets are
		// applied and never read, so no Secret is cached (nor may be: RBAC grants no get).
		o.Cache.ByObject = map[client.Object]cache.ByObject{&batchv1.Job{}: {
			Namespaces: map[string]cache.Config{buildNamespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{banlieuev1.LabelComponent: imagebuilder.ComponentBuild}),
		}}
	}
	r.setup = func(mgr manager.Manager, opts app.Options) error {
		return imagebuilder.Setup(mgr, imagebuilder.Options{
			Workers: opts.Workers, BuildNamespace: buildNamespace, BuildImage: buildImage, ArtifactsPVC: artifactsPVC,
			NodeSelector: nodeSelector, Tolerations: tolerations, Limits: limits, Bounds: bounds,
			Pull: pull, CAConfigMap: caConfigMap,
		})
	}
	cmd := r.command("imagebuilder", "Build raw guest images from VMImage Url sources onto the artifacts volume")
	// Bad values are fatal at startup, before anything is reconciled.
	f := cmd.Flags()
	cmd.PreRunE = func(*cobra.Command, []string) error {
		tolerations, nodeSelector = nil, map[string]string{}
		for _, s := range tolerationFlags {
			t, err := operator.ParseToleration(s)
			if err != nil {
				return err
			}
			tolerations = append(tolerations, t)
		}
		for _, s := range selectorFlags {
			k, v, ok := strings.Cut(s, "=")
			if !ok || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
				return fmt.Errorf("invalid --build-node-selector: %q: want KEY=VALUE", s)
			}
			nodeSelector[k] = v
		}
		if err := pull.Validate("build"); err != nil {
			return err
		}
		if caConfigMap != "" {
			if errs := validation.IsDNS1123Subdomain(caConfigMap); len(errs) > 0 {
				return fmt.Errorf("invalid --build-ca-configmap: %q: %s", caConfigMap, errs[0])
			}
		}
		// A build pod killed while its decoder fills its dictionary would fail every xz or zstd
		// source, retries included: refused here, where the flags that clash are named.
		need := limits.MaxXZDictBytes + limits.MaxZstdWindowBytes + jobbounds.RuntimeMemory
		if err := bounds.Validate("build", need); err != nil {
			return fmt.Errorf("%w (--%s %s, --%s %s and %s for the runtime)", err,
				build.FlagMaxXZDict, f.Lookup(build.FlagMaxXZDict).Value, build.FlagMaxZstdWindow, f.Lookup(build.FlagMaxZstdWindow).Value,
				resource.NewQuantity(jobbounds.RuntimeMemory, resource.BinarySI))
		}
		return nil
	}
	f.StringVar(&buildNamespace, "build-namespace", envOr("BANLIEUE_BUILD_NAMESPACE", "banlieue-imagebuild"),
		"namespace of the artifacts PVC and the build Jobs (env BANLIEUE_BUILD_NAMESPACE)")
	f.StringArrayVar(&selectorFlags, "build-node-selector", nil, "KEY=VALUE node selector of build pods (repeatable)")
	f.StringArrayVar(&tolerationFlags, "build-toleration", nil, "key[=value]:Effect toleration of build pods (repeatable)")
	f.StringVar(&buildImage, "build-image", envOr("BANLIEUE_BUILD_IMAGE", "banlieue:"+currentVersion().Version),
		"image the build Jobs run (env BANLIEUE_BUILD_IMAGE)")
	f.StringVar(&artifactsPVC, "artifacts-pvc", envOr("BANLIEUE_ARTIFACTS_PVC", "banlieue-artifacts"),
		"PVC the builds write to (env BANLIEUE_ARTIFACTS_PVC)")
	f.StringVar(&caConfigMap, "build-ca-configmap", os.Getenv("BANLIEUE_BUILD_CA_CONFIGMAP"),
		"ConfigMap in the build namespace whose every key is a PEM CA bundle build Jobs trust for https sources and registries, "+
			"beside the image's roots (env BANLIEUE_BUILD_CA_CONFIGMAP)")
	pull.AddFlags(f, "build")
	limits.AddFlags(f)
	bounds.AddFlags(f, "build")
	cmd.AddCommand(newImagebuilderBuildCommand())
	return cmd
}
