package libvirt

import (
	"slices"
	"time"

	"banlieue.io/banlieue/pkg/libvirt/internal/wire"
)

// CallObserver is told the outcome of one call, once the caller has it: the procedure's name as
// this package spells it in errors (CONNECT_OPEN, DOMAIN_CREATE_WITH_FLAGS,
// QEMU_DOMAIN_AGENT_COMMAND; one of Procedures), the time from sending it to its reply, and the
// error the caller got: nil, an *Error libvirtd answered, or a transport, protocol or timeout
// error. For STORAGE_VOL_UPLOAD and STORAGE_VOL_DOWNLOAD it is the call that opens the stream,
// not the data that follows. Keepalive pings are not calls. It runs on the caller's goroutine,
// so it must return quickly, and it must not call the Client.
type CallObserver func(procedure string, elapsed time.Duration, err error)

// Procedures are the names a CallObserver may be given, sorted: the typed table's, so that an
// observer can bound or pre-create what it records.
func Procedures() []string {
	names := make([]string, 0, len(procedureNames)+1)
	for _, n := range procedureNames {
		names = append(names, n)
	}
	names = append(names, opName(wire.ProgramQEMU, qemuProcAgentCommand))
	slices.Sort(names)
	return names
}

func (c *Client) observe(prog uint32, proc procedure, start time.Time, err error) {
	if c.observer != nil {
		c.observer(opName(prog, proc), time.Since(start), err)
	}
}
