package libvirt

import "strconv"

// procedure is a procedure number of the REMOTE program (remote_protocol.x), or of the QEMU
// program for qemuProcAgentCommand.
type procedure int32

const (
	procConnectOpen                procedure = 1
	procConnectClose               procedure = 2
	procNodeGetInfo                procedure = 6
	procConnectGetCapabilities     procedure = 7
	procDomainDestroy              procedure = 12
	procDomainGetXMLDesc           procedure = 14
	procDomainLookupByName         procedure = 23
	procDomainReboot               procedure = 27
	procDomainResume               procedure = 28
	procDomainSuspend              procedure = 34
	procNetworkDefineXML           procedure = 41
	procNetworkLookupByName        procedure = 46
	procNetworkUndefine            procedure = 49
	procAuthList                   procedure = 66
	procStoragePoolCreateXML       procedure = 76
	procStoragePoolDefineXML       procedure = 77
	procStoragePoolCreate          procedure = 78
	procStoragePoolDestroy         procedure = 80
	procStoragePoolRefresh         procedure = 83
	procStoragePoolLookupByName    procedure = 84
	procStoragePoolGetInfo         procedure = 87
	procStorageVolCreateXML        procedure = 93
	procStorageVolCreateXMLFrom    procedure = 125
	procStorageVolDelete           procedure = 94
	procStorageVolLookupByName     procedure = 95
	procStorageVolGetInfo          procedure = 98
	procStorageVolGetXMLDesc       procedure = 99
	procConnectGetLibVersion       procedure = 157
	procDomainGetBlockInfo         procedure = 194
	procDomainUpdateDeviceFlags    procedure = 174
	procDomainCreateWithFlags      procedure = 196
	procDomainOpenConsole          procedure = 201
	procStorageVolUpload           procedure = 208
	procStorageVolDownload         procedure = 209
	procDomainGetState             procedure = 212
	procDomainBlockResize          procedure = 251
	procStorageVolResize           procedure = 260
	procDomainUndefineFlags        procedure = 231
	procDomainShutdownFlags        procedure = 258
	procConnectListAllDomains      procedure = 273
	procConnectListAllStoragePools procedure = 281
	procStoragePoolListAllVolumes  procedure = 282
	procConnectListAllNetworks     procedure = 283
	procConnectListAllInterfaces   procedure = 284
	procDomainDefineXMLFlags       procedure = 350
	procDomainInterfaceAddresses   procedure = 353
	// Migration (migrate.go).
	procDomainAbortJob              procedure = 164
	procDomainMigrateSetMaxDowntime procedure = 166
	procDomainMigrateSetMaxSpeed    procedure = 207
	procDomainGetJobStats           procedure = 298
	procDomainMigratePerform3Params procedure = 305
	// Snapshots (snapshot.go).
	procDomainSnapshotCreateXML procedure = 185
	procDomainBlockJobAbort     procedure = 237
	procDomainGetBlockJobInfo   procedure = 238
	procDomainBlockCommit       procedure = 290
	procDomainFSFreeze          procedure = 335
	procDomainFSThaw            procedure = 336
	qemuProcAgentCommand        procedure = 3
	keepAliveProcPing           procedure = 1
	keepAliveProcPong           procedure = 2
	keepAliveProtocolVersion    uint32    = 1
	protocolVersion             uint32    = 1
)

// Domain events (events.go): the callback registration procedures, and the procedures of the
// MESSAGE packets libvirtd sends for the callbacks registered.
const (
	procConnectDomainEventCallbackRegisterAny   procedure = 316
	procConnectDomainEventCallbackDeregisterAny procedure = 317
	procDomainEventCallbackLifecycle            procedure = 318
	procDomainEventCallbackDeviceRemoved        procedure = 333
)

var procedureNames = map[procedure]string{
	procConnectOpen:                "CONNECT_OPEN",
	procConnectClose:               "CONNECT_CLOSE",
	procNodeGetInfo:                "NODE_GET_INFO",
	procConnectGetCapabilities:     "CONNECT_GET_CAPABILITIES",
	procDomainDestroy:              "DOMAIN_DESTROY",
	procDomainGetXMLDesc:           "DOMAIN_GET_XML_DESC",
	procDomainLookupByName:         "DOMAIN_LOOKUP_BY_NAME",
	procDomainReboot:               "DOMAIN_REBOOT",
	procDomainResume:               "DOMAIN_RESUME",
	procDomainSuspend:              "DOMAIN_SUSPEND",
	procNetworkDefineXML:           "NETWORK_DEFINE_XML",
	procNetworkLookupByName:        "NETWORK_LOOKUP_BY_NAME",
	procNetworkUndefine:            "NETWORK_UNDEFINE",
	procAuthList:                   "AUTH_LIST",
	procStoragePoolCreateXML:       "STORAGE_POOL_CREATE_XML",
	procStoragePoolDefineXML:       "STORAGE_POOL_DEFINE_XML",
	procStoragePoolCreate:          "STORAGE_POOL_CREATE",
	procStoragePoolDestroy:         "STORAGE_POOL_DESTROY",
	procStoragePoolRefresh:         "STORAGE_POOL_REFRESH",
	procStoragePoolLookupByName:    "STORAGE_POOL_LOOKUP_BY_NAME",
	procStoragePoolGetInfo:         "STORAGE_POOL_GET_INFO",
	procStorageVolCreateXML:        "STORAGE_VOL_CREATE_XML",
	procStorageVolDelete:           "STORAGE_VOL_DELETE",
	procStorageVolLookupByName:     "STORAGE_VOL_LOOKUP_BY_NAME",
	procStorageVolGetInfo:          "STORAGE_VOL_GET_INFO",
	procStorageVolGetXMLDesc:       "STORAGE_VOL_GET_XML_DESC",
	procConnectGetLibVersion:       "CONNECT_GET_LIB_VERSION",
	procDomainGetBlockInfo:         "DOMAIN_GET_BLOCK_INFO",
	procDomainUpdateDeviceFlags:    "DOMAIN_UPDATE_DEVICE_FLAGS",
	procDomainCreateWithFlags:      "DOMAIN_CREATE_WITH_FLAGS",
	procDomainOpenConsole:          "DOMAIN_OPEN_CONSOLE",
	procStorageVolUpload:           "STORAGE_VOL_UPLOAD",
	procStorageVolDownload:         "STORAGE_VOL_DOWNLOAD",
	procStorageVolCreateXMLFrom:    "STORAGE_VOL_CREATE_XML_FROM",
	procDomainGetState:             "DOMAIN_GET_STATE",
	procDomainBlockResize:          "DOMAIN_BLOCK_RESIZE",
	procStorageVolResize:           "STORAGE_VOL_RESIZE",
	procDomainUndefineFlags:        "DOMAIN_UNDEFINE_FLAGS",
	procDomainShutdownFlags:        "DOMAIN_SHUTDOWN_FLAGS",
	procConnectListAllDomains:      "CONNECT_LIST_ALL_DOMAINS",
	procConnectListAllStoragePools: "CONNECT_LIST_ALL_STORAGE_POOLS",
	procStoragePoolListAllVolumes:  "STORAGE_POOL_LIST_ALL_VOLUMES",
	procConnectListAllNetworks:     "CONNECT_LIST_ALL_NETWORKS",
	procConnectListAllInterfaces:   "CONNECT_LIST_ALL_INTERFACES",
	procDomainDefineXMLFlags:       "DOMAIN_DEFINE_XML_FLAGS",
	procDomainInterfaceAddresses:   "DOMAIN_INTERFACE_ADDRESSES",

	procDomainAbortJob:              "DOMAIN_ABORT_JOB",
	procDomainMigrateSetMaxDowntime: "DOMAIN_MIGRATE_SET_MAX_DOWNTIME",
	procDomainMigrateSetMaxSpeed:    "DOMAIN_MIGRATE_SET_MAX_SPEED",
	procDomainGetJobStats:           "DOMAIN_GET_JOB_STATS",
	procDomainMigratePerform3Params: "DOMAIN_MIGRATE_PERFORM3_PARAMS",
	procDomainSnapshotCreateXML:     "DOMAIN_SNAPSHOT_CREATE_XML",
	procDomainBlockJobAbort:         "DOMAIN_BLOCK_JOB_ABORT",
	procDomainGetBlockJobInfo:       "DOMAIN_GET_BLOCK_JOB_INFO",
	procDomainBlockCommit:           "DOMAIN_BLOCK_COMMIT",
	procDomainFSFreeze:              "DOMAIN_FSFREEZE",
	procDomainFSThaw:                "DOMAIN_FSTHAW",

	procConnectDomainEventCallbackRegisterAny:   "CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY",
	procConnectDomainEventCallbackDeregisterAny: "CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY",
	procDomainEventCallbackLifecycle:            "DOMAIN_EVENT_CALLBACK_LIFECYCLE",
	procDomainEventCallbackDeviceRemoved:        "DOMAIN_EVENT_CALLBACK_DEVICE_REMOVED",
}

func (p procedure) String() string {
	if n, ok := procedureNames[p]; ok {
		return n
	}
	return "procedure " + strconv.Itoa(int(p))
}

// Limits from remote_protocol.x that bound what a reply may make the client allocate. Object
// lists all use 16384 (libvirt caps pools alone at 4096): one generous bound is simpler and
// still rejects a corrupt count long before it costs memory.
const (
	maxString       = 4194304 // REMOTE_STRING_MAX
	maxListObjects  = 16384   // pools, volumes, networks, interfaces, domains
	maxDomainIfaces = 2048    // REMOTE_DOMAIN_INTERFACE_MAX
	maxIfaceAddrs   = 2048    // REMOTE_DOMAIN_IP_ADDR_MAX
	maxAuthTypes    = 20      // REMOTE_AUTH_TYPE_LIST_MAX
)
