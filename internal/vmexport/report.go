package vmexport

import (
	"encoding/json"
	"errors"

	"banlieue.io/banlieue/internal/vmexport/exportjob"
)

// maxReport bounds a report: the kubelet keeps at most 4096 bytes of a container's termination
// message, and a truncated JSON document would read as no report at all.
const maxReport = 4096

// Report is an export's outcome as one JSON document (exportjob.Report).
type Report = exportjob.Report

// EncodeReport is res or err as a Report of at most maxReport bytes.
func EncodeReport(res MachineResult, err error) []byte {
	r := Report{MachineResult: &res}
	if err != nil {
		r = Report{Step: StepOf(err), Error: err.Error(), VMRunning: errors.Is(err, ErrVMRunning)}
	}
	out, _ := json.Marshal(r) // a struct of strings, numbers and bools always encodes
	for len(out) > maxReport && r.Error != "" {
		// Cut the message, never the fields a reader needs; JSON escaping may grow it, so retry.
		r.Error = string([]rune(r.Error)[:len([]rune(r.Error))*3/4]) + "…"
		out, _ = json.Marshal(r)
	}
	return out
}
