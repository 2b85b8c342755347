package libvirt

import (
	"bytes"
	"errors"
	"testing"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
	"banlieue.io/banlieue/pkg/libvirt/internal/xdr"
)

// The power flags go on the wire as libvirt-domain.h numbers them: the ACPI button is 1 and the
// guest agent 2, for DOMAIN_SHUTDOWN_FLAGS and DOMAIN_REBOOT alike (remote_domain_shutdown_flags_args
// and remote_domain_reboot_args: the domain, then unsigned int flags). libvirtd's refusal when no
// agent answers comes back as the call's error, which the provider reads to fall back to the button.
func TestDomainPowerFlagsWire(t *testing.T) {
	dom := Domain{Name: "vm-1", UUID: UUID{9, 8, 7}, ID: 3}
	type call struct {
		proc procedure
		args []byte
	}
	var calls []call
	f := startFake(t, func(s *fakeSession) {
		for {
			h, payload, err := s.read()
			if err != nil {
				return
			}
			calls = append(calls, call{procedure(h.Procedure), payload})
			if len(calls) == 3 { // the agent has gone: VIR_ERR_AGENT_UNRESPONSIVE
				s.replyError(h, 86, "Guest agent is not responding: QEMU guest agent is not connected")
				continue
			}
			s.reply(h, wire.OK, nil)
		}
	})
	c := f.dial(t)
	ctx := testContext(t)
	if err := c.DomainShutdown(ctx, dom, PowerGuestAgent); err != nil {
		t.Fatal(err)
	}
	if err := c.DomainReboot(ctx, dom, PowerGuestAgent); err != nil {
		t.Fatal(err)
	}
	err := c.DomainShutdown(ctx, dom, PowerGuestAgent)
	var remote *Error
	if !errors.As(err, &remote) || remote.Code != 86 || remote.Procedure != "DOMAIN_SHUTDOWN_FLAGS" {
		t.Fatalf("agent shutdown without an agent: %v, want libvirtd's error 86 naming DOMAIN_SHUTDOWN_FLAGS", err)
	}
	if err := c.DomainShutdown(ctx, dom, PowerACPIButton); err != nil {
		t.Fatal(err)
	}
	args := func(flags uint32) []byte {
		e := xdr.NewEncoder(nil)
		encodeDomain(e, dom)
		e.Uint32(flags)
		return e.Bytes()
	}
	want := []call{
		{procDomainShutdownFlags, args(2)},
		{procDomainReboot, args(2)},
		{procDomainShutdownFlags, args(2)},
		{procDomainShutdownFlags, args(1)},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(calls), len(want))
	}
	for i, w := range want {
		if calls[i].proc != w.proc || !bytes.Equal(calls[i].args, w.args) {
			t.Errorf("call %d: %s %x, want %s %x", i, procedureNames[calls[i].proc], calls[i].args, procedureNames[w.proc], w.args)
		}
	}
}
