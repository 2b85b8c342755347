// Package console brings a VirtualMachine's serial console to a Kubernetes user, authorised by a
// Kubernetes permission and never by host credentials (ADR-0140, docs/security.md "Console").
//
// Three hops, each authenticated:
//
//	user --(kubeconfig)--> kube-apiserver --(front-proxy cert, X-Remote-*)--> relay (Server)
//	relay --(per-Provider audience token, TLS)--> the VM's provider --(pooled mTLS RPC)--> libvirtd
//
// The relay is an aggregated API (APIService v1alpha1.subresources.banlieue.io) hosted by the
// controller role. It verifies the kube-apiserver's front-proxy client certificate, authorises
// the forwarded user with a SubjectAccessReview for get on virtualmachines/console, and relays
// the upgraded connection to the provider of the VM's Provider, which alone holds that host's
// key. The provider's end (internal/provider/libvirt, console endpoint) checks the relay's token
// with a TokenReview for its own audience, so a token one provider receives opens nothing on
// another. This package never imports pkg/libvirt: the controller must not (test/boundaries).
package console
