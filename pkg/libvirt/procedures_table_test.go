package libvirt

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

// libvirtProcedures reads testdata/procedures.tsv, libvirt's own procedure table at the pinned
// release (hack/libvirt-procedures.sh writes it from remote_protocol.x, qemu_protocol.x and
// virkeepaliveprotocol.x): program → procedure name → number.
func libvirtProcedures(t *testing.T) map[string]map[string]int32 {
	t.Helper()
	data, err := os.ReadFile("testdata/procedures.tsv")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int32{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			t.Fatalf("procedures.tsv: malformed line %q", line)
		}
		n, err := strconv.ParseInt(fields[2], 10, 32)
		if err != nil {
			t.Fatalf("procedures.tsv: %q: %v", line, err)
		}
		if out[fields[0]] == nil {
			out[fields[0]] = map[string]int32{}
		}
		out[fields[0]][fields[1]] = int32(n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProcedureNumbersMatchLibvirt holds every procedure the client calls, by number and by the
// wire name its errors carry, to libvirt's protocol definition: a mistyped number would call
// another procedure and decode its reply as garbage.
func TestProcedureNumbersMatchLibvirt(t *testing.T) {
	table := libvirtProcedures(t)
	if len(table["REMOTE"]) < 400 {
		t.Fatalf("procedures.tsv holds %d REMOTE procedures; is it truncated?", len(table["REMOTE"]))
	}
	for proc, name := range procedureNames {
		want, ok := table["REMOTE"][name]
		switch {
		case !ok:
			t.Errorf("procedure %d is named %s, which libvirt's REMOTE program does not have", proc, name)
		case int32(proc) != want:
			t.Errorf("%s is procedure %d here, %d in libvirt", name, proc, want)
		}
	}
	for _, c := range []struct {
		program, name string
		got           procedure
	}{
		{"QEMU", "DOMAIN_AGENT_COMMAND", qemuProcAgentCommand},
		{"KEEPALIVE", "PING", keepAliveProcPing},
		{"KEEPALIVE", "PONG", keepAliveProcPong},
	} {
		if want, ok := table[c.program][c.name]; !ok || int32(c.got) != want {
			t.Errorf("%s_PROC_%s is %d here, %d in libvirt (present: %v)", c.program, c.name, c.got, want, ok)
		}
	}
}
