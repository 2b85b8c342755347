module banlieue.io/banlieue/bench/libvirt

go 1.26.0

require (
	banlieue.io/banlieue v0.0.0
	github.com/digitalocean/go-libvirt v0.0.0-20261013170128-efbbdf578ac8
)

require (
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace banlieue.io/banlieue => ../..
