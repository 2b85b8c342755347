// Package load holds the load and fleet bench (load_test.go, build tag loadbench): N powered-off
// VirtualMachines created, then deleted, all at once (or -rate R a second) on each of one or more
// hosts, with the roles in the test process or (-processes) as processes of the real binary, a
// provider per host. The hosts are the lab's, or (-hosts H) H libvirtds of their own started by
// hosts.sh. It never runs in a plain go test:
//
//	source /var/tmp/banlieue-lab/env
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -n 200 -processes
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 90m -args -hosts 100 -n 50 -processes [-rate 5]
//	go test -tags loadbench ./bench/load -run TestLoad -v -timeout 60m -args -hosts 1 -n 200 -processes -virsh
package load
