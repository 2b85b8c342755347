package libvirt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"banlieue.io/banlieue/pkg/libvirt"
)

func ExampleDialer_Dial() {
	ep, err := libvirt.ParseEndpoint("qemu+tls://hv1.example.net/system")
	if err != nil {
		log.Fatal(err)
	}
	creds, err := libvirt.ReadPKIDir(os.ExpandEnv("$HOME/.config/banlieue/libvirt"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := libvirt.Dialer{Endpoint: ep, Credentials: creds}.Dial(ctx)
	if err != nil {
		log.Fatal(err) // e.g. "libvirt tls hv1.example.net:16514: invalid server name: …"
	}
	defer c.Close()

	dom, err := c.DomainLookupByName(ctx, "vm1")
	switch {
	case libvirt.IsNotFound(err):
		fmt.Println("vm1 is not defined")
	case err != nil:
		log.Fatal(err)
	default:
		state, _, err := c.DomainState(ctx, dom)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(dom.Name, dom.UUID, state)
	}
}

// A long-lived owner keeps one Client per host and redials when it ends.
func ExampleClient_Done() {
	var d libvirt.Dialer // Endpoint and Credentials set as in the Dialer example
	ctx := context.Background()
	for ctx.Err() == nil {
		c, err := d.Dial(ctx)
		if err != nil {
			log.Print(err)
			time.Sleep(5 * time.Second) // back off before redialling
			continue
		}
		<-c.Done() // hand c to users meanwhile; Done closes when the connection ends
		log.Printf("libvirt connection lost: %v", c.Err())
	}
}
