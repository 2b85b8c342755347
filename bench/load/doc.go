// Package load holds issue 10's load bench (load_test.go, build tag loadbench): N powered-off
// VirtualMachines created at once against one lab host, with the controller role and the libvirt
// machine controller in the test process, or (-processes) as two processes of the real binary.
// It never runs in a plain go test:
//
//	source /var/tmp/banlieue-lab/env
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -n 200 -processes
package load
