package v1alpha1

// The finalizers, labels, annotations and field managers the roles set and read: one place, so
// that two roles meaning the same key name the same constant (docs/design/roles.md).

// Finalizers.
const (
	// FinalizerVirtualMachine holds a VM until its infrastructure machines are gone.
	FinalizerVirtualMachine = "banlieue.io/virtualmachine"
	// FinalizerVirtualMachineMigration holds a migration until the request it wrote into its
	// VM's machine (spec.migration) is withdrawn, so deleting a migration stops the move.
	FinalizerVirtualMachineMigration = "banlieue.io/virtualmachinemigration"
	// FinalizerVirtualMachineSnapshot holds a snapshot until its VM's machine no longer lists
	// it: its layer merged away by the provider, or the machine gone with every layer.
	FinalizerVirtualMachineSnapshot = "banlieue.io/virtualmachinesnapshot"
	// FinalizerVirtualMachineRestore holds a restore until its request is withdrawn from the
	// machine (spec.restore), never in the middle of the provider's restore.
	FinalizerVirtualMachineRestore = "banlieue.io/virtualmachinerestore"
	// FinalizerProviderInUse keeps a Provider while machines reference it: the provider needs
	// the Provider's credentials to tear a machine down (docs/decisions.md).
	FinalizerProviderInUse = "banlieue.io/provider-in-use"
	// FinalizerProviderWorkload holds a Provider until its workload, including the never-owned
	// ClusterRoleBinding, is gone.
	FinalizerProviderWorkload = "banlieue.io/provider-workload"
	// FinalizerClaimProtection holds a claimed pool member until its claim lets it go.
	FinalizerClaimProtection = "banlieue.io/claim-protection"
)

// Labels. The app.kubernetes.io keys follow Kubernetes' recommended labels.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelInstance  = "app.kubernetes.io/instance"

	// LabelProvider, LabelProviderNamespace and LabelProviderClass mark a Provider's workload
	// objects (docs/guides/libvirt-provider.md, "5. What the operator creates for it").
	LabelProvider          = "banlieue.io/provider"
	LabelProviderNamespace = "banlieue.io/provider-namespace"
	LabelProviderClass     = "banlieue.io/provider-class"

	// LabelOwnedBy marks an infrastructure machine with the VM it realises.
	LabelOwnedBy = "banlieue.io/owned-by"
	// LabelUserData is "true" on a user's Secret that may be copied into a guest as its
	// user-data (VirtualMachine spec.userData.secretRef); a Secret without it is refused with
	// UserDataNotOptedIn. On banlieue's own per-machine user-data Secret it is "machine".
	LabelUserData = "banlieue.io/user-data"
	// LabelVMImage marks build and import Jobs with the VMImage they work for.
	LabelVMImage = "banlieue.io/vmimage"
	// LabelStoragePool marks an import Job with the libvirt storage pool it writes into.
	LabelStoragePool = "banlieue.io/storage-pool"

	// LabelPool, LabelPoolImageRevision and LabelClaim mark a VirtualMachinePool's members
	// (docs/reference/api.md).
	LabelPool              = "banlieue.io/pool"
	LabelPoolImageRevision = "banlieue.io/pool-image-revision"
	LabelClaim             = "banlieue.io/claim"
)

// Annotations.
const (
	// AnnotationMigrate lets a user approve a recreate under migrationPolicy manual.
	AnnotationMigrate = "banlieue.io/migrate"
	// AnnotationDrainedProvider names the Provider (namespace/name) whose drain created a
	// VirtualMachineMigration, for people reading it.
	AnnotationDrainedProvider = "banlieue.io/drained-provider"

	// AnnotationSourceHash identifies the source (importFrom and checksum) a build Job builds:
	// the Job spec is immutable, so a changed source can only be honoured by replacing the Job.
	// A hash, not the URL: the URL may carry a credential, and lives in the build Secret only
	// (docs/guides/image-sources.md, "Credentials in source URLs").
	AnnotationSourceHash = "banlieue.io/source-hash"
	// AnnotationAllowUnverifiedTag is "true" on a build Job whose source sets
	// allowUnverifiedTag, so turning it off replaces the Job as a changed source does.
	AnnotationAllowUnverifiedTag = "banlieue.io/allow-unverified-tag"
	// AnnotationArtifactKind is the kind a build Job's output name assumes (.raw or .iso). It
	// outlives a replacement made because the build found the other kind, which the URL did
	// not reveal.
	AnnotationArtifactKind = "banlieue.io/artifact-kind"

	// AnnotationArtifactChecksum records which artifact an import Job imports, so a rebuilt
	// artifact can be told from the one a finished Job already imported.
	AnnotationArtifactChecksum = "banlieue.io/artifact-checksum"
	// AnnotationProvider names the Provider (namespace/name) an import Job imports for, for
	// people reading the Job: its name and labels may carry a hash instead.
	AnnotationProvider = "banlieue.io/provider"
	// AnnotationImportIdentity is the identity of the VMImage, Provider, pool and checksum an
	// import Job was created for: with the VMImage's UID in its controller reference, the proof
	// that a Job of the expected name is banlieue's own.
	AnnotationImportIdentity = "banlieue.io/import-identity"
	// AnnotationWorkloadFingerprint is a hash of everything the operator last applied for a
	// Provider, kept on its Deployment: WorkloadApplied is announced only when it moves.
	AnnotationWorkloadFingerprint = "banlieue.io/workload-fingerprint"

	// AnnotationClaimSubjectIssuer and AnnotationClaimSubjectID record who holds a claimed
	// pool member.
	AnnotationClaimSubjectIssuer = "banlieue.io/claim-subject-issuer"
	AnnotationClaimSubjectID     = "banlieue.io/claim-subject-id"
)

// Field managers: each role applies the fields it owns under its own name (docs/architecture.md,
// "Field managers (server-side apply)").
const (
	FieldManagerController      = "banlieue.io/controller"
	FieldManagerPoolController  = "banlieue.io/pool-controller"
	FieldManagerOperator        = "banlieue.io/operator"
	FieldManagerImagebuilder    = "banlieue.io/imagebuilder"
	FieldManagerProviderLibvirt = "banlieue.io/provider-libvirt"
	// FieldManagerProviderLibvirtMigrationTarget owns a LibvirtMachine's
	// status.migrationTarget, written by the target Provider's provider of a live move while
	// the rest of the machine is the source Provider's.
	FieldManagerProviderLibvirtMigrationTarget = "banlieue.io/provider-libvirt-migration-target"
	FieldManagerProviderVSphere                = "banlieue.io/provider-vsphere"
)
