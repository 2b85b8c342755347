package libvirt

import "testing"

func TestDomainType(t *testing.T) {
	guest := func(osType, arch string, types ...string) string {
		s := "<guest><os_type>" + osType + "</os_type><arch name='" + arch + "'><wordsize>64</wordsize>"
		for _, ty := range types {
			s += "<domain type='" + ty + "'/>"
		}
		return s + "</arch></guest>"
	}
	caps := func(guests ...string) string {
		s := "<capabilities><host><cpu><arch>x86_64</arch></cpu></host>"
		for _, g := range guests {
			s += g
		}
		return s + "</capabilities>"
	}
	tests := []struct {
		name, xml, want string
		wantErr         bool
	}{
		{"kvm offered", caps(guest("hvm", "i686", "qemu"), guest("hvm", "x86_64", "qemu", "kvm")), "kvm", false},
		{"tcg only", caps(guest("hvm", "x86_64", "qemu")), "qemu", false},
		{"kvm only for another arch", caps(guest("hvm", "i686", "qemu", "kvm"), guest("hvm", "x86_64", "qemu")), "qemu", false},
		{"not hvm", caps(guest("exe", "x86_64", "kvm")), "", true},
		{"no guests", caps(), "", true},
		{"not xml", "<capabilities", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DomainType(tt.xml, "x86_64")
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("DomainType = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
