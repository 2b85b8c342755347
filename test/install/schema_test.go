package install

import (
	"strings"
	"testing"
)

// TestChartValuesSchema: charts/banlieue/values.schema.json refuses each bad value before
// anything renders, with a message that names the value (the path for a wrong type or form, the
// key for an unknown one), and accepts the defaults, every documented non-default value and the
// monitoring kit's values.
func TestChartValuesSchema(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		set      []string // --set, or --set-string when prefixed with "string:"
		wantName string   // "" when the values must be accepted
	}{
		{set: nil},
		{set: []string{"controller.replicas=0", "imagebuilder.jobs.cpuLimit=0", "operator.importJobs.cpuLimit=0.5"}},
		{set: []string{"monitoring.service.enabled=true", "monitoring.serviceMonitor.enabled=true",
			"monitoring.serviceMonitor.interval=1m", "monitoring.serviceMonitor.labels.release=prom",
			"monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=prom",
			"monitoring.dashboard.enabled=true", "string:monitoring.dashboard.labels.grafana_dashboard=1"}},
		{set: []string{"podSecurityContext.runAsUser=1000", "podSecurityContext.seccompProfile.type=Localhost",
			"podSecurityContext.seccompProfile.localhostProfile=profiles/banlieue.json", "securityContext.capabilities.add[0]=NET_BIND_SERVICE",
			"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
			"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway", "controller.replicas=3", "string:pdb.minAvailable=50%"}},

		{set: []string{"networkPolicy.apiServer.cidrs={192.0.2.10/32,2001:db8::10/128}", "networkPolicy.apiServer.ports={6443}",
			"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring", "networkPolicy.providerNamespaces={tenant-a,tenant-b}",
			"networkPolicy.libvirtHosts.cidrs={10.20.0.0/16}", "networkPolicy.buildSources.ports={443,5000}",
			"monitoring.service.enabled=true", "monitoring.serviceMonitor.enabled=true",
			"monitoring.serviceMonitor.certificate.issuerRef.name=cluster-ca", "monitoring.serviceMonitor.certificate.issuerRef.kind=ClusterIssuer"}},
		{set: []string{"networkPolicy.enabled=false"}},

		{set: []string{"networkPolicy.apiServer.cidrs={kubernetes.default}"}, wantName: "/networkPolicy/apiServer/cidrs/0"},
		{set: []string{"networkPolicy.libvirtHosts.ports={0}"}, wantName: "/networkPolicy/libvirtHosts/ports/0"},
		{set: []string{"networkPolicy.providerNamespaces={Tenant_A}"}, wantName: "/networkPolicy/providerNamespaces/0"},
		{set: []string{"networkPolicy.metricsFrom[0].ipblock.cidr=10.0.0.0/8"}, wantName: "'ipblock'"},
		{set: []string{"networkPolicy.enable=false"}, wantName: "'enable'"},
		{set: []string{"monitoring.serviceMonitor.certificate.issuerRef.kind=Vault"}, wantName: "/monitoring/serviceMonitor/certificate/issuerRef/kind"},
		{set: []string{"monitoring.serviceMonitor.certificate.insecureSkipVerify=true"}, wantName: "'insecureSkipVerify'"},
		{set: []string{"controller.replicas=abc"}, wantName: "/controller/replicas"},
		{set: []string{"operator.replicas=-1"}, wantName: "/operator/replicas"},
		{set: []string{"controller.workers=0"}, wantName: "/controller/workers"},
		{set: []string{"imagebuilder.workers=65"}, wantName: "/imagebuilder/workers"},
		{set: []string{"providerClass.concurrency.workers=0"}, wantName: "/providerClass/concurrency/workers"},
		{set: []string{"providerClass.concurrency.hostDomainOperations=257"}, wantName: "/providerClass/concurrency/hostDomainOperations"},
		{set: []string{"providerClass.concurrency.hostVolumeUploads=-1"}, wantName: "/providerClass/concurrency/hostVolumeUploads"},
		{set: []string{"log.format=xml"}, wantName: "/log/format"},
		{set: []string{"log.level=verbose"}, wantName: "/log/level"},
		{set: []string{"controler.replicas=3"}, wantName: "'controler'"},
		{set: []string{"operator.importJobs.memoryLimt=1Gi"}, wantName: "'memoryLimt'"},
		{set: []string{"image.digest=sha256:abc"}, wantName: "/image/digest"},
		{set: []string{"image.pullPolicy=Sometimes"}, wantName: "/image/pullPolicy"},
		{set: []string{"image.repository="}, wantName: "/image/repository"},
		{set: []string{"namespaces.imagebuild.podSecurity.enforce=strict"}, wantName: "/namespaces/imagebuild/podSecurity/enforce"},
		// The release namespace is helm's: the chart labels only the build namespace.
		{set: []string{"namespaces.system.podSecurity.enforce=restricted"}, wantName: "'system'"},
		{set: []string{"imagebuilder.jobs.deadline=soon"}, wantName: "/imagebuilder/jobs/deadline"},
		{set: []string{"imagebuilder.limits.maxDiskSize=big"}, wantName: "/imagebuilder/limits/maxDiskSize"},
		{set: []string{"imagebuilder.limits.allowNetworks[0]=mirror.lan"}, wantName: "/imagebuilder/limits/allowNetworks/0"},
		{set: []string{"resources.limits.memory=lots"}, wantName: "/resources/limits/memory"},
		{set: []string{"artifacts.accessModes[0]=ReadWriteSometimes"}, wantName: "/artifacts/accessModes/0"},
		{set: []string{"providerClass.name=Libvirt_Class"}, wantName: "/providerClass/name"},
		{set: []string{"nodeSelector.disk=1"}, wantName: "/nodeSelector/disk"},
		{set: []string{"imagePullSecrets[0].nmae=regcred"}, wantName: "'nmae'"},
		{set: []string{`podLabels.app\.kubernetes\.io/component=other`}, wantName: "/podLabels/app.kubernetes.io~1component"},
		{set: []string{"podAnnotations.replicas=2"}, wantName: "/podAnnotations/replicas"},
		{set: []string{"serviceAccount.annotation.a=b"}, wantName: "'annotation'"},
		{set: []string{"monitoring.service.enabled=yes"}, wantName: "/monitoring/service/enabled"},
		{set: []string{"monitoring.servicemonitor.enabled=true"}, wantName: "'servicemonitor'"},
		{set: []string{"monitoring.serviceMonitor.interval=often"}, wantName: "/monitoring/serviceMonitor/interval"},
		{set: []string{"monitoring.prometheusRule.labels.enabled=true"}, wantName: "/monitoring/prometheusRule/labels/enabled"},
		{set: []string{"monitoring.dashboard.folder=banlieue"}, wantName: "'folder'"},
		// Restricted Pod Security and the read-only root filesystem hold whatever is set.
		{set: []string{"podSecurityContext.runAsNonRoot=false"}, wantName: "/podSecurityContext/runAsNonRoot"},
		{set: []string{"podSecurityContext.runAsUser=0"}, wantName: "/podSecurityContext/runAsUser"},
		{set: []string{"podSecurityContext.seccompProfile.type=Unconfined"}, wantName: "/podSecurityContext/seccompProfile/type"},
		{set: []string{"podSecurityContext.seccompProfile=null"}, wantName: "'seccompProfile'"},
		{set: []string{"podSecurityContext.sysctls[0].name=net.ipv4.ip_forward"}, wantName: "'sysctls'"},
		{set: []string{"securityContext.allowPrivilegeEscalation=true"}, wantName: "/securityContext/allowPrivilegeEscalation"},
		{set: []string{"securityContext.readOnlyRootFilesystem=false"}, wantName: "/securityContext/readOnlyRootFilesystem"},
		{set: []string{"securityContext.privileged=true"}, wantName: "'privileged'"},
		{set: []string{"securityContext.capabilities.add[0]=SYS_ADMIN"}, wantName: "/securityContext/capabilities/add/0"},
		{set: []string{"securityContext.capabilities.drop[0]=NET_RAW"}, wantName: "/securityContext/capabilities/drop"},
		{set: []string{"topologySpreadConstraints[0].maxSkew=1"}, wantName: "/topologySpreadConstraints/0"},
		{set: []string{"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=zone",
			"topologySpreadConstraints[0].whenUnsatisfiable=Maybe"}, wantName: "/topologySpreadConstraints/0/whenUnsatisfiable"},
		{set: []string{"pdb.minAvailable=half"}, wantName: "/pdb/minAvailable"},
		{set: []string{"pdb.minAvailable=-1"}, wantName: "/pdb/minAvailable"},
		{set: []string{"pdb.enable=true"}, wantName: "'enable'"},
		{set: []string{"crds.enabled=no"}, wantName: "/crds/enabled"},
		{set: []string{"crds.keepCRDs=true"}, wantName: "'keepCRDs'"},
	} {
		name := strings.Join(tc.set, ",")
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			var args []string
			for _, v := range tc.set {
				if s, ok := strings.CutPrefix(v, "string:"); ok {
					args = append(args, "--set-string", s)
				} else {
					args = append(args, "--set", v)
				}
			}
			out, errOut, err := helmTemplate(helm, args...)
			switch {
			case tc.wantName == "" && err != nil:
				t.Fatalf("refused: %v\n%s", err, errOut)
			case tc.wantName == "":
				if len(parseObjects(t, out)) == 0 {
					t.Fatal("accepted but rendered nothing")
				}
			case err == nil:
				t.Fatalf("accepted; want a refusal naming %s", tc.wantName)
			case !strings.Contains(errOut, "values don't meet the specifications of the schema") ||
				!strings.Contains(errOut, tc.wantName):
				t.Fatalf("refused with %q; want the schema's refusal naming %s", errOut, tc.wantName)
			}
		})
	}

	// Every documented non-default value (TestChartValues renders them) passes the schema.
	if _, errOut, err := helmTemplate(helm, nonDefaultValues("sha256:"+strings.Repeat("ab", 32))...); err != nil {
		t.Errorf("the non-default values are refused: %v\n%s", err, errOut)
	}
}
