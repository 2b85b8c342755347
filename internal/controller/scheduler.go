package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
	"banlieue.io/banlieue/internal/tenancy"
)

// Failure domain features the scheduler checks by name.
const (
	featureEFISecureBoot = "efiSecureBoot"
	featureVTPM          = "vtpm"
)

// maxRejectReasons bounds the reasons quoted in a Scheduled message so a namespace with many
// Providers cannot grow the condition without limit.
const maxRejectReasons = 10

// scheduleInput is everything one placement decision depends on.
type scheduleInput struct {
	VM    *banlieuev1.VirtualMachine
	Class *banlieuev1.VMClass
	Image *banlieuev1.VMImage
	// Providers are the candidates: the Providers of the VM's namespace and of any namespace
	// whose allowedNamespaces might admit it; schedule keeps those that do.
	Providers []banlieuev1.Provider
	// NamespaceLabels are the labels of the VM's namespace, for allowedNamespaces selectors.
	NamespaceLabels map[string]string
	// Siblings are the VMs of the VM's namespace, the VM itself included or not.
	Siblings []banlieuev1.VirtualMachine
	// Elsewhere are the placed VMs of other namespaces on the candidate Providers (shared
	// ones); with the siblings they are what each failure domain has allocated.
	Elsewhere []banlieuev1.VirtualMachine
	// Classes are the VMClasses of placements recorded without their cpus and memoryMiB and of
	// placements not yet provisioned (whose disks a datastore's free space does not show yet),
	// by name.
	Classes map[string]*banlieuev1.VMClass
	// Evict is set while the drain of the VM's Provider moves it: its recorded placement is
	// not kept, so it is placed as a new VM would be (the drained Provider is cordoned).
	Evict bool
}

// decision is where a VM goes and what its class names resolve to there.
type decision struct {
	Provider         *banlieuev1.Provider
	FailureDomain    banlieuev1.FailureDomain
	ResolvedStorage  []banlieuev1.ResolvedMapping
	ResolvedNetworks []banlieuev1.ResolvedMapping
	// Demand is what the VM takes there.
	Demand demand
}

// placement is the decision as status.scheduled records it, without the time.
func (d decision) placement() banlieuev1.ScheduledPlacement {
	return banlieuev1.ScheduledPlacement{
		ProviderName:      d.Provider.Name,
		ProviderNamespace: d.Provider.Namespace,
		ProviderClass:     d.Provider.Spec.ProviderClassRef.Name,
		FailureDomain:     d.FailureDomain.Name,
		ResolvedStorage:   d.ResolvedStorage,
		ResolvedNetworks:  d.ResolvedNetworks,
		CPUs:              int32(d.Demand.cpus),
		MemoryMiB:         int32(d.Demand.memoryMiB),
	}
}

// scheduleError is a failed placement; Reason becomes the Scheduled condition's reason.
type scheduleError struct {
	Reason  string
	Message string
}

func (e *scheduleError) Error() string { return e.Message }

// rejectKind is why a failure domain was filtered out; the precedence of the final error
// depends on it.
type rejectKind int

const (
	rejectOther rejectKind = iota
	rejectFirmware
	rejectTPM
)

type candidate struct {
	provider *banlieuev1.Provider
	fd       banlieuev1.FailureDomain
}

// schedule places a VM (docs/guides/libvirt-provider.md, "7. Run a VM"). It is pure: the same input always gives the same
// answer, which is what lets the reconciler run it on every pass and detect drift.
func schedule(in scheduleInput) (decision, error) {
	var placement banlieuev1.Placement
	if in.VM.Spec.Placement != nil {
		placement = *in.VM.Spec.Placement
	}

	providers := sortedProviders(in.VM.Namespace, in.Providers)
	var (
		selected, matched []*banlieuev1.Provider
		refusals          rejectReasons
		own               int
	)
	for _, p := range providers {
		if p.Namespace == in.VM.Namespace {
			own++
		}
		if matches(placement.ProviderSelector, p.Labels) {
			selected = append(selected, p)
		}
	}
	for _, p := range selected {
		if ok, rule := tenancy.AdmitsNamespace(p, in.VM.Namespace, in.NamespaceLabels); !ok {
			refusals.add(fmt.Sprintf("Provider %s/%s refuses namespace %s: %s", p.Namespace, p.Name, in.VM.Namespace, rule))
			continue
		}
		matched = append(matched, p)
	}
	switch {
	case len(selected) == 0:
		return decision{}, &scheduleError{banlieuev1.ReasonNoProviderMatched, fmt.Sprintf(
			"no Provider in namespace %s, nor shared with it, matches the providerSelector (%d Provider(s) in the namespace)",
			in.VM.Namespace, own)}
	case len(matched) == 0:
		return decision{}, &scheduleError{banlieuev1.ReasonNamespaceNotAllowed, fmt.Sprintf(
			"every Provider matching the providerSelector is in another namespace and does not admit namespace %s: %s",
			in.VM.Namespace, refusals)}
	}

	var (
		reasons     rejectReasons
		survivors   []candidate
		imageReady  bool
		firmwareOut bool
		tpmOut      bool
	)
	for _, p := range matched {
		if row := imageRow(in.Image, p); row == nil || !row.Ready {
			reasons.add(fmt.Sprintf("provider %s: %s", providerLabel(in.VM, p), imageNotReadyDetail(in.Image, row)))
			continue
		}
		imageReady = true
		if len(p.Status.FailureDomains) == 0 {
			reasons.add(fmt.Sprintf("provider %s: publishes no failure domains", providerLabel(in.VM, p)))
			continue
		}
		for _, fd := range sortedFailureDomains(p.Status.FailureDomains) {
			if kind, why := rejectFailureDomain(placement.FailureDomainSelector, in.Class, fd); why != "" {
				reasons.add(fmt.Sprintf("%s/%s: %s", providerLabel(in.VM, p), fd.Name, why))
				firmwareOut = firmwareOut || kind == rejectFirmware
				tpmOut = tpmOut || kind == rejectTPM
				continue
			}
			survivors = append(survivors, candidate{provider: p, fd: fd})
		}
	}
	if len(survivors) == 0 {
		switch {
		case !imageReady:
			return decision{}, &scheduleError{banlieuev1.ReasonImageNotReady, fmt.Sprintf(
				"VMImage %s is not ready on any candidate Provider: %s", in.Image.Name, reasons)}
		case firmwareOut:
			return decision{}, &scheduleError{banlieuev1.ReasonFirmwareUnsupported, fmt.Sprintf(
				"VMClass %s needs firmware %s, which requires failure domain feature %s: %s",
				in.Class.Name, banlieuev1.FirmwareEFISecure, featureEFISecureBoot, reasons)}
		case tpmOut:
			return decision{}, &scheduleError{banlieuev1.ReasonTpmUnsupported, fmt.Sprintf(
				"VMClass %s has tpmEnabled, which requires failure domain feature %s (never auto-discovered; "+
					"declare it in the Provider's capabilities.features): %s", in.Class.Name, featureVTPM, reasons)}
		default:
			return decision{}, &scheduleError{banlieuev1.ReasonNoFailureDomainMatched,
				fmt.Sprintf("no failure domain matched: %s", reasons)}
		}
	}

	siblings := otherScheduled(in.VM, in.Siblings)
	var (
		allowed  []candidate
		affinity rejectReasons
	)
	for _, c := range survivors {
		if rule, ok := blockedBy(placement.AntiAffinity, c.fd, siblings); ok {
			affinity.add(fmt.Sprintf("%s/%s: a sibling matching a required anti-affinity rule is already in %s=%s",
				providerLabel(in.VM, c.provider), c.fd.Name, rule.TopologyKey, c.fd.Labels[rule.TopologyKey]))
			continue
		}
		allowed = append(allowed, c)
	}
	if len(allowed) == 0 {
		return decision{}, &scheduleError{banlieuev1.ReasonAntiAffinityUnsatisfied,
			fmt.Sprintf("required anti-affinity left no failure domain: %s", affinity)}
	}

	need := classDemand(in.Class)
	if c, ok := recordedCandidate(in.VM, allowed); ok && !in.Evict {
		// A placed VM stays where it is while the filters above still allow it: capacity and
		// cordons only decide where new placements go, and scoring again would move VMs about
		// as the fleet's load changes.
		return decisionFor(in, c, need), nil
	}
	allowed, err := schedulable(in.VM, allowed)
	if err != nil {
		return decision{}, err
	}
	placed := append(slices.Clip(siblings), in.Elsewhere...)
	used := allocations(in.VM, placed, in.Classes)
	promised := unprovisioned(in.VM, placed, in.Classes)
	fits := make([]fit, len(allowed))
	var (
		room    []int
		noSpace rejectReasons
	)
	for i, c := range allowed {
		fits[i] = fitOf(c, used)
		if !fits[i].holds(need) {
			continue
		}
		k := fdKey{namespace: c.provider.Namespace, provider: c.provider.Name, fd: c.fd.Name}
		if why := datastoreShortfall(datastoreNeed(in.VM, in.Class, c.provider), promised[k], c.fd); why != "" {
			noSpace.add(fmt.Sprintf("%s/%s: %s", providerLabel(in.VM, c.provider), c.fd.Name, why))
			continue
		}
		room = append(room, i)
	}
	if len(room) == 0 && len(noSpace.kept) > 0 {
		return decision{}, &scheduleError{banlieuev1.ReasonInsufficientCapacity,
			"no failure domain with room for the VM's CPUs and memory has the datastore space for its disks: " + noSpace.String()}
	}
	if len(room) == 0 {
		return decision{}, insufficient(in.VM, in.Class, need, allowed, fits)
	}

	// Candidates are already in (own namespace first, provider name, namespace, FD name)
	// order; a stable sort on the preferred anti-affinity score, then the strategy's load,
	// keeps that order among equals.
	binpack := placement.Strategy == banlieuev1.PlacementBinpack
	slices.SortStableFunc(room, func(a, b int) int {
		pa := preferredScore(placement.AntiAffinity, allowed[a].fd, siblings)
		pb := preferredScore(placement.AntiAffinity, allowed[b].fd, siblings)
		la, lb := fits[a].load(need), fits[b].load(need)
		if binpack {
			la, lb = lb, la
		}
		return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(la, lb))
	})
	return decisionFor(in, allowed[room[0]], need), nil
}

func decisionFor(in scheduleInput, c candidate, need demand) decision {
	return decision{
		Provider:         c.provider,
		FailureDomain:    c.fd,
		ResolvedStorage:  resolveStorage(in.Class, c.provider),
		ResolvedNetworks: resolveNetworks(in.Class, c.provider),
		Demand:           need,
	}
}

// recordedCandidate is the candidate the VM's recorded placement names, if it is still one.
func recordedCandidate(vm *banlieuev1.VirtualMachine, cands []candidate) (candidate, bool) {
	s := vm.Status.Scheduled
	if s == nil {
		return candidate{}, false
	}
	ns := cmp.Or(s.ProviderNamespace, vm.Namespace)
	for _, c := range cands {
		if c.provider.Name == s.ProviderName && c.provider.Namespace == ns && c.fd.Name == s.FailureDomain {
			return c, true
		}
	}
	return candidate{}, false
}

// schedulable drops the candidates of cordoned Providers (spec.unschedulable).
func schedulable(vm *banlieuev1.VirtualMachine, cands []candidate) ([]candidate, error) {
	var (
		out      []candidate
		cordoned rejectReasons
	)
	for _, c := range cands {
		if c.provider.Spec.Unschedulable {
			cordoned.add(providerLabel(vm, c.provider))
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, &scheduleError{banlieuev1.ReasonProviderUnschedulable,
			fmt.Sprintf("every Provider that could hold the VM is cordoned (spec.unschedulable): %s", cordoned)}
	}
	return out, nil
}

// rejectFailureDomain runs the scheduler's filters (docs/guides/libvirt-provider.md, "7. Run a VM") on one failure domain (the image
// filter is per Provider). The first failing filter explains the rejection.
func rejectFailureDomain(sel *banlieuev1.LabelSelector, class *banlieuev1.VMClass,
	fd banlieuev1.FailureDomain) (rejectKind, string) {
	attrs := fd.Attributes
	if !matches(sel, fd.Labels) {
		return rejectOther, "labels do not match the failureDomainSelector"
	}
	for _, d := range class.Spec.Hardware.Disks {
		if !slices.Contains(attrs.AvailableStorageClasses, d.StorageClass) {
			return rejectOther, fmt.Sprintf("storageClass %s (disk %s) is not available", d.StorageClass, d.Name)
		}
	}
	for _, nic := range class.Spec.Network.Interfaces {
		if !slices.Contains(attrs.AvailableNetworkClasses, nic.NetworkClass) {
			return rejectOther, fmt.Sprintf("networkClass %s (interface %s) is not available", nic.NetworkClass, nic.Name)
		}
	}
	for _, f := range class.Spec.Features {
		if !slices.Contains(attrs.Features, f) {
			return rejectOther, fmt.Sprintf("feature %s is not advertised", f)
		}
	}
	if class.Spec.Firmware == banlieuev1.FirmwareEFISecure && !slices.Contains(attrs.Features, featureEFISecureBoot) {
		return rejectFirmware, fmt.Sprintf("firmware %s needs feature %s", banlieuev1.FirmwareEFISecure, featureEFISecureBoot)
	}
	if class.Spec.TPMEnabled && !slices.Contains(attrs.Features, featureVTPM) {
		return rejectTPM, fmt.Sprintf("tpmEnabled needs feature %s", featureVTPM)
	}
	return rejectOther, ""
}

// imageRow is the image's row for p. Rows are matched on name and namespace (docs/decisions.md): two
// namespaces may each hold a Provider of the same name on different hosts.
func imageRow(image *banlieuev1.VMImage, p *banlieuev1.Provider) *banlieuev1.ProviderImageStatus {
	for i := range image.Status.PerProvider {
		row := &image.Status.PerProvider[i]
		if row.ProviderName == p.Name && row.ProviderNamespace == p.Namespace {
			return row
		}
	}
	return nil
}

func imageNotReadyDetail(image *banlieuev1.VMImage, row *banlieuev1.ProviderImageStatus) string {
	if row == nil {
		return fmt.Sprintf("VMImage %s has no status row for this Provider", image.Name)
	}
	detail := fmt.Sprintf("VMImage %s is not ready", image.Name)
	if row.Reason != "" {
		detail += " (" + row.Reason
		if row.Message != "" {
			detail += ": " + row.Message
		}
		detail += ")"
	}
	return detail
}

// otherScheduled are the siblings that hold a placement, the VM itself excluded.
func otherScheduled(vm *banlieuev1.VirtualMachine, siblings []banlieuev1.VirtualMachine) []banlieuev1.VirtualMachine {
	var out []banlieuev1.VirtualMachine
	for _, s := range siblings {
		if s.Name == vm.Name || s.Status.Scheduled == nil {
			continue
		}
		out = append(out, s)
	}
	return out
}

// blockedBy returns the first required rule that excludes fd. The blocked values are sibling
// failure-domain names compared with the FD's topologyKey label, the v1 approximation of
// docs/guides/libvirt-provider.md, "7. Run a VM"
func blockedBy(rules []banlieuev1.AntiAffinityRule, fd banlieuev1.FailureDomain,
	siblings []banlieuev1.VirtualMachine) (banlieuev1.AntiAffinityRule, bool) {
	for _, rule := range rules {
		if rule.Mode == "preferred" {
			continue
		}
		if siblingsIn(rule, fd, siblings) > 0 {
			return rule, true
		}
	}
	return banlieuev1.AntiAffinityRule{}, false
}

// preferredScore counts the siblings the preferred rules would rather not share fd with.
func preferredScore(rules []banlieuev1.AntiAffinityRule, fd banlieuev1.FailureDomain,
	siblings []banlieuev1.VirtualMachine) int {
	n := 0
	for _, rule := range rules {
		if rule.Mode == "preferred" {
			n += siblingsIn(rule, fd, siblings)
		}
	}
	return n
}

func siblingsIn(rule banlieuev1.AntiAffinityRule, fd banlieuev1.FailureDomain, siblings []banlieuev1.VirtualMachine) int {
	value, ok := fd.Labels[rule.TopologyKey]
	if !ok {
		return 0
	}
	n := 0
	for _, s := range siblings {
		if s.Status.Scheduled.FailureDomain == value && matches(&rule.LabelSelector, s.Labels) {
			n++
		}
	}
	return n
}

func resolveStorage(class *banlieuev1.VMClass, p *banlieuev1.Provider) []banlieuev1.ResolvedMapping {
	var out []banlieuev1.ResolvedMapping
	for _, d := range class.Spec.Hardware.Disks {
		backend := d.StorageClass
		if i := slices.IndexFunc(p.Spec.Capabilities.StorageClasses, func(m banlieuev1.StorageClassMapping) bool {
			return m.Name == d.StorageClass
		}); i >= 0 {
			backend = firstTarget(p.Spec.Capabilities.StorageClasses[i].Target, d.StorageClass)
		}
		out = append(out, banlieuev1.ResolvedMapping{ClassName: d.StorageClass, BackendID: backend})
	}
	return out
}

func resolveNetworks(class *banlieuev1.VMClass, p *banlieuev1.Provider) []banlieuev1.ResolvedMapping {
	var out []banlieuev1.ResolvedMapping
	for _, nic := range class.Spec.Network.Interfaces {
		backend := nic.NetworkClass
		if m := networkMapping(p, nic.NetworkClass); m != nil {
			backend = firstTarget(m.Target, nic.NetworkClass)
		}
		out = append(out, banlieuev1.ResolvedMapping{ClassName: nic.NetworkClass, BackendID: backend})
	}
	return out
}

// networkMapping is the Provider's declaration of a network class, or nil.
func networkMapping(p *banlieuev1.Provider, class string) *banlieuev1.NetworkClassMapping {
	for i := range p.Spec.Capabilities.NetworkClasses {
		if p.Spec.Capabilities.NetworkClasses[i].Name == class {
			return &p.Spec.Capabilities.NetworkClasses[i]
		}
	}
	return nil
}

// firstTarget is the value of the smallest key, so a mapping with both bridge and network
// resolves to the bridge; a mapping without targets resolves to the class name itself.
func firstTarget(target map[string]string, fallback string) string {
	if len(target) == 0 {
		return fallback
	}
	keys := make([]string, 0, len(target))
	for k := range target {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return target[keys[0]]
}

// sortedProviders orders the candidates: the VM's own namespace first (a team's own host
// before a shared one), then by name, then by namespace.
func sortedProviders(vmNamespace string, in []banlieuev1.Provider) []*banlieuev1.Provider {
	out := make([]*banlieuev1.Provider, 0, len(in))
	for i := range in {
		out = append(out, &in[i])
	}
	slices.SortFunc(out, func(a, b *banlieuev1.Provider) int {
		return cmp.Or(
			-cmp.Compare(boolRank(a.Namespace == vmNamespace), boolRank(b.Namespace == vmNamespace)),
			strings.Compare(a.Name, b.Name),
			strings.Compare(a.Namespace, b.Namespace))
	})
	return out
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// providerLabel names p in a message: by name in the VM's namespace, namespace/name elsewhere.
func providerLabel(vm *banlieuev1.VirtualMachine, p *banlieuev1.Provider) string {
	if p.Namespace == vm.Namespace {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

func sortedFailureDomains(in []banlieuev1.FailureDomain) []banlieuev1.FailureDomain {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b banlieuev1.FailureDomain) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rejectReasons keeps the first maxRejectReasons explanations and counts the rest.
type rejectReasons struct {
	kept []string
	more int
}

func (r *rejectReasons) add(reason string) {
	if len(r.kept) < maxRejectReasons {
		r.kept = append(r.kept, reason)
		return
	}
	r.more++
}

func (r rejectReasons) String() string {
	s := strings.Join(r.kept, "; ")
	if r.more > 0 {
		s += fmt.Sprintf("; … and %d more", r.more)
	}
	return s
}
