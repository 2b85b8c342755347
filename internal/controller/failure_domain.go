package controller

import (
	"fmt"
	"strings"

	infrav1 "banlieue.io/banlieue/api/infrastructure/v1alpha1"
)

// placementRefusal is why a Cluster API machine without providerRef is not placed: its
// Scheduled (and, until placed, Ready) reason and a message naming the field.
type placementRefusal struct {
	reason  string
	message string
}

func (p *placementRefusal) Error() string { return p.message }

// machinePlacement is what chooseFailureDomain decides from.
type machinePlacement struct {
	// namespace and machine name the LibvirtMachine and its owner Machine.
	namespace, machine string
	// asked is the Machine's spec.failureDomain, empty when it names none.
	asked string
	// controlPlane is whether the Machine is a control plane's: it goes only to a failure domain
	// with controlPlane true when it asks for none, as Cluster API's control planes choose.
	controlPlane bool
	// cluster is the LibvirtCluster of the Machine's Cluster.
	cluster *infrav1.LibvirtCluster
	// placed counts the cluster's machines already placed, by failure domain (Provider) name.
	placed map[string]int
}

// chooseFailureDomain is the Provider a Cluster API machine without providerRef goes to
// (docs/adr/0144-failure-domain-placement.md): the Machine's failure domain when it names one,
// which must be one of its LibvirtCluster's status.failureDomains (the Providers that exist and
// admit the namespace); otherwise the eligible failure domain with the fewest of the cluster's
// machines, the first in status order on a tie. The Provider's namespace is the failure
// domain's provider-namespace attribute, left unset when it is the machine's own.
func chooseFailureDomain(p machinePlacement) (*infrav1.ProviderReference, error) {
	domains := p.cluster.Status.FailureDomains
	names := make([]string, 0, len(domains))
	for _, d := range domains {
		names = append(names, d.Name)
	}
	var chosen *infrav1.FailureDomain
	if p.asked != "" {
		for i := range domains {
			if domains[i].Name == p.asked {
				chosen = &domains[i]
				break
			}
		}
		if chosen == nil {
			return nil, &placementRefusal{reason: infrav1.ReasonFailureDomainUnknown, message: fmt.Sprintf(
				"owner Machine %s: spec.failureDomain %q is none of LibvirtCluster %s's status.failureDomains [%s]; the machine is not placed",
				p.machine, p.asked, p.cluster.Name, strings.Join(names, " "))}
		}
	} else {
		for i := range domains {
			d := &domains[i]
			if p.controlPlane && (d.ControlPlane == nil || !*d.ControlPlane) {
				continue
			}
			if chosen == nil || p.placed[d.Name] < p.placed[chosen.Name] {
				chosen = d
			}
		}
		if chosen == nil {
			what := "failure domain"
			if p.controlPlane {
				what = "failure domain with controlPlane true (the Machine is a control plane's)"
			}
			return nil, &placementRefusal{reason: infrav1.ReasonNoFailureDomain, message: fmt.Sprintf(
				"owner Machine %s names no spec.failureDomain and LibvirtCluster %s has no %s in status.failureDomains [%s]; the machine is not placed",
				p.machine, p.cluster.Name, what, strings.Join(names, " "))}
		}
	}
	ref := &infrav1.ProviderReference{Name: chosen.Name}
	if ns := chosen.Attributes[AttributeProviderNamespace]; ns != "" && ns != p.namespace {
		ref.Namespace = ns
	}
	return ref, nil
}
