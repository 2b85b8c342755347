package controller

import (
	"testing"

	banlieuev1 "banlieue.io/banlieue/api/v1alpha1"
)

func TestRenderUserData(t *testing.T) {
	full := []banlieuev1.NetworkOverride{
		{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24, Gateway: "10.0.0.1",
			Nameservers: []string{"10.0.0.2", "10.0.0.3"}, Domain: "edge.example"}},
		{Name: "nic1", Static: banlieuev1.StaticIpamConfig{Address: "192.168.0.5", Prefix: 16, Domain: "other.example"}},
	}
	all := "${VM_NAME}|${FQDN}|${IP}|${PREFIX}|${GATEWAY}|${DNS}|${DOMAIN}"
	tests := []struct {
		name      string
		text      string
		vm        string
		overrides []banlieuev1.NetworkOverride
		want      string
	}{
		{"every placeholder from the first override", all, "web-01", full,
			"web-01|web-01.edge.example|10.0.0.5|24|10.0.0.1|10.0.0.2,10.0.0.3|edge.example"},
		{"no override gives empty values and a rooted fqdn", all, "web-01", nil, "web-01|web-01.|||||"},
		{"empty domain", "${FQDN}", "web-01", []banlieuev1.NetworkOverride{{Name: "nic0", Static: banlieuev1.StaticIpamConfig{Address: "10.0.0.5", Prefix: 24}}}, "web-01."},
		{"name already qualified", "${FQDN}", "web-01.edge.example", full, "web-01.edge.example"},
		{"name qualified with other case", "${FQDN}", "web-01.EDGE.example", full, "web-01.EDGE.example"},
		{"suffix without a dot is not a qualification", "${FQDN}", "xedge.example", full, "xedge.example.edge.example"},
		{"prefix zero is printed", "${PREFIX}", "vm", []banlieuev1.NetworkOverride{{Name: "n", Static: banlieuev1.StaticIpamConfig{Address: "::1"}}}, "0"},
		{"repeated placeholders", "${VM_NAME} ${VM_NAME}", "a", nil, "a a"},
		{"unknown placeholders stay", "${HOSTNAME} $VM_NAME ${vm_name}", "a", nil, "${HOSTNAME} $VM_NAME ${vm_name}"},
		{"values are not expanded again", "${DOMAIN}", "a", []banlieuev1.NetworkOverride{{Name: "n", Static: banlieuev1.StaticIpamConfig{Domain: "${VM_NAME}"}}}, "${VM_NAME}"},
		{"no placeholders", "#cloud-config\npackages: [nginx]\n", "a", full, "#cloud-config\npackages: [nginx]\n"},
		{"guide example", "#cloud-config\nhostname: ${VM_NAME}\nfqdn: ${FQDN}\n", "web-01", nil, "#cloud-config\nhostname: web-01\nfqdn: web-01.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderUserData(tt.text, tt.vm, tt.overrides); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
