#!/usr/bin/env bash
# bootstrap-libvirt-tls.sh — turn a libvirt/KVM host into one banlieue can reach: libvirtd
# speaking mutual TLS on port 16514, where the client certificate is the only credential.
#
# Run it as root on the libvirt host:
#
#   scp scripts/bootstrap-libvirt-tls.sh kvm-1.example:/tmp/
#   ssh kvm-1.example 'sudo /tmp/bootstrap-libvirt-tls.sh'
#
# Run with --help for the options. Safe to run again: existing keys and certificates are kept
# unless they are missing, broken, about to expire, lack a requested name, or --rotate /
# --rotate-ca asks for new ones.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
umask 022

prog=${0##*/}

usage() {
	cat <<EOF
Usage: $prog [OPTIONS]

Sets up libvirtd on this host for mutual TLS (what banlieue's libvirt provider speaks):

  1. PKI (openssl), kept when already present:
       /etc/pki/CA/cacert.pem                  CA certificate
       /etc/pki/CA/private/cakey.pem           CA key (mode 600)
       /etc/pki/libvirt/servercert.pem         libvirtd's certificate (SANs: see --san)
       /etc/pki/libvirt/private/serverkey.pem  its key (mode 600)
       /etc/pki/libvirt/clientcert.pem         a client certificate signed by the CA
       /etc/pki/libvirt/private/clientkey.pem  its key (mode 600)
  2. /etc/libvirt/libvirtd.conf: listen_tls = 1, listen_tcp = 0, auth_tls = "none"; every
     other setting is kept, the original is saved once as libvirtd.conf.banlieue-orig.
  3. Restarts libvirt unless nothing changed and it already answers over TLS: with systemd, stops libvirtd.service, enables and starts
     libvirtd.socket, libvirtd-ro.socket, libvirtd-admin.socket and libvirtd-tls.socket, then
     starts libvirtd.service; without systemd, starts virtlogd if needed and restarts
     'libvirtd --listen --daemon'. Then checks that libvirtd answers over TLS.
  4. Copies the client credentials (cacert.pem, clientcert.pem, clientkey.pem) to
     ~/.config/banlieue/libvirt/ of the user who ran sudo (root's when not run through sudo),
     owned by that user, directory mode 700, key mode 600. They are written as that user
     (runuser), and a destination that is a symbolic link, a directory or a FIFO is refused,
     as it is for every file under /etc/pki and libvirtd.conf: nothing is changed through a link.

Options:
  --san NAME|IP     a DNS name or IP address clients will dial; repeatable. Replaces the
                    defaults: this host's FQDN, short hostname, localhost, 127.0.0.1, every
                    IPv4 address of the host, and virbr0's address (from the interface, or from
                    libvirt's default network definition when the bridge is not up).
  --extra-san NAME|IP
                    add a name or address to the defaults (or to the --san list); repeatable.
  --cn NAME         common name of the client certificate (default: banlieue-client); an
                    existing client certificate with another CN is re-issued.
  --days N          validity of new server and client certificates in days (default: 3650).
  --ca-days N       validity of a new CA certificate in days (default: 3650, at least --days).
  --key-bits N      RSA key size for new keys: 2048, 3072 or 4096 (default: 3072).
  --rotate          issue a new server and client certificate from the existing CA.
  --rotate-ca       create a new CA (the old one is kept as *.pem.replaced-<time>), then new
                    server and client certificates. Every client must get the new cacert.pem.
  --client-dir DIR  where to leave the client credentials
                    (default: ~/.config/banlieue/libvirt of the invoking user).
  --root DIR        prefix for every /etc path (for tests and image builds); implies
                    --no-restart, and root privileges are not required.
  --no-restart      only write files; do not touch running services.
  -h, --help        show this help.

Re-running is safe: the CA and certificates are kept, and a certificate is only re-issued when
it is missing or unreadable, does not match its key or the CA, expires within 30 days (a third of
--days for shorter lifetimes), lacks a requested --san, or has another CN than a given --cn.

Exit status: 0 on success, 1 on failure, 2 on a usage error. Private keys are never printed.
EOF
}

say() { printf '[%s] %s\n' "$prog" "$*" >&2; }
warn() { printf '[%s] warning: %s\n' "$prog" "$*" >&2; }
die() {
	printf '[%s] error: %s\n' "$prog" "$*" >&2
	exit 1
}
usage_error() {
	printf '%s: %s\nTry '\''%s --help'\''.\n' "$prog" "$*" "$prog" >&2
	exit 2
}

# ------------------------------------------------------------------------------- options
ROOT=""
CLIENT_DIR=""
CLIENT_CN="banlieue-client"
CN_GIVEN=0
DAYS=3650
CA_DAYS=3650
KEY_BITS=3072
ROTATE=0
ROTATE_CA=0
RESTART=1
SANS=()
EXTRA_SANS=()

need_arg() { if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "option $1 needs a value"; fi; }
while [ $# -gt 0 ]; do
	case "$1" in
	--san) need_arg "$@"; SANS+=("$2"); shift 2 ;;
	--san=*) SANS+=("${1#*=}"); shift ;;
	--extra-san) need_arg "$@"; EXTRA_SANS+=("$2"); shift 2 ;;
	--extra-san=*) EXTRA_SANS+=("${1#*=}"); shift ;;
	--cn) need_arg "$@"; CLIENT_CN=$2; CN_GIVEN=1; shift 2 ;;
	--cn=*) CLIENT_CN=${1#*=}; CN_GIVEN=1; shift ;;
	--days) need_arg "$@"; DAYS=$2; shift 2 ;;
	--days=*) DAYS=${1#*=}; shift ;;
	--ca-days) need_arg "$@"; CA_DAYS=$2; shift 2 ;;
	--ca-days=*) CA_DAYS=${1#*=}; shift ;;
	--key-bits) need_arg "$@"; KEY_BITS=$2; shift 2 ;;
	--key-bits=*) KEY_BITS=${1#*=}; shift ;;
	--rotate) ROTATE=1; shift ;;
	--rotate-ca) ROTATE_CA=1; ROTATE=1; shift ;;
	--client-dir) need_arg "$@"; CLIENT_DIR=$2; shift 2 ;;
	--client-dir=*) CLIENT_DIR=${1#*=}; shift ;;
	--root) need_arg "$@"; ROOT=$2; shift 2 ;;
	--root=*) ROOT=${1#*=}; shift ;;
	--no-restart) RESTART=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown option '$1'" ;;
	esac
done

case "$DAYS" in '' | *[!0-9]* | 0) usage_error "--days must be a positive number, got '$DAYS'" ;; esac
case "$CA_DAYS" in '' | *[!0-9]* | 0) usage_error "--ca-days must be a positive number, got '$CA_DAYS'" ;; esac
[ "$CA_DAYS" -ge "$DAYS" ] || CA_DAYS=$DAYS
case "$KEY_BITS" in 2048 | 3072 | 4096) ;; *) usage_error "--key-bits must be 2048, 3072 or 4096, got '$KEY_BITS'" ;; esac
# Certificates are renewed when they expire within 30 days (a third of --days for short ones).
RENEW_SECS=$((DAYS * 86400 / 3))
[ "$RENEW_SECS" -le 2592000 ] || RENEW_SECS=2592000
[ -n "$CLIENT_CN" ] || usage_error "--cn must not be empty"
case "$CLIENT_CN" in *[[:cntrl:]]*) usage_error "--cn must not contain control characters" ;; esac
[ ${#CLIENT_CN} -le 64 ] || usage_error "--cn is longer than 64 characters (the X.509 limit)"

if [ -n "$ROOT" ]; then
	mkdir -p "$ROOT" || die "cannot create --root directory '$ROOT'"
	ROOT=$(cd "$ROOT" && pwd)
	[ "$ROOT" = / ] && ROOT=""
fi
if [ -n "$ROOT" ] && [ "$RESTART" = 1 ]; then
	say "--root given: files only, services are not restarted"
	RESTART=0
fi

IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
[ "$IS_ROOT" = 1 ] || [ -n "$ROOT" ] || die "must run as root (try: sudo $0), or use --root DIR to write into a directory"
command -v openssl >/dev/null || die "openssl is not installed (Debian/Ubuntu: apt-get install openssl; RHEL/Fedora: dnf install openssl)"

# ------------------------------------------------------------------------------- paths
CA_DIR=$ROOT/etc/pki/CA
CA_CERT=$CA_DIR/cacert.pem
CA_KEY=$CA_DIR/private/cakey.pem
LV_DIR=$ROOT/etc/pki/libvirt
SERVER_CERT=$LV_DIR/servercert.pem
SERVER_KEY=$LV_DIR/private/serverkey.pem
CLIENT_CERT=$LV_DIR/clientcert.pem
CLIENT_KEY=$LV_DIR/private/clientkey.pem
CONF=$ROOT/etc/libvirt/libvirtd.conf

# must_be_regular PATH — refuse a destination that exists and is not a regular file: a
# symbolic link (chmod and a plain chown follow it, so they would change whatever it points at,
# e.g. libvirtd's own CA), a directory or a FIFO.
must_be_regular() {
	if [ -L "$1" ]; then
		die "refusing to write $1: it is a symbolic link (to $(readlink -- "$1")); remove it and run again"
	elif [ -e "$1" ] && [ ! -f "$1" ]; then
		die "refusing to write $1: it exists and is not a regular file; remove it and run again"
	fi
}

# must_be_dir PATH — refuse a directory the script writes into that is a symbolic link.
must_be_dir() {
	if [ -L "$1" ]; then
		die "refusing to use $1: it is a symbolic link (to $(readlink -- "$1")); give the real directory"
	elif [ -e "$1" ] && [ ! -d "$1" ]; then
		die "refusing to use $1: it exists and is not a directory"
	fi
}

for f in "$CA_CERT" "$CA_KEY" "$SERVER_CERT" "$SERVER_KEY" "$CLIENT_CERT" "$CLIENT_KEY" "$CONF"; do
	must_be_regular "$f"
done
for d in "$CA_DIR" "$CA_DIR/private" "$LV_DIR" "$LV_DIR/private"; do
	must_be_dir "$d"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bootstrap-libvirt-tls.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
chmod 700 "$WORK"

# run CMD... — run a command, showing its output only when it fails.
run() {
	if ! "$@" >"$WORK/out" 2>&1; then
		sed 's/^/    /' "$WORK/out" >&2
		return 1
	fi
}

# ------------------------------------------------------------------------------- SANs
is_ipv4() {
	local IFS=. x
	[[ $1 =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || return 1
	# shellcheck disable=SC2086
	set -- $1
	for x in "$@"; do [ $((10#$x)) -le 255 ] || return 1; done
}
is_ipv6() { [[ $1 == *:* && $1 =~ ^[0-9A-Fa-f:.]+$ ]]; }
is_dns() { [[ $1 =~ ^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$ ]] && [ ${#1} -le 253 ]; }

default_sans() {
	local fqdn short a
	fqdn=$(hostname -f 2>/dev/null || true)
	short=$(hostname -s 2>/dev/null || hostname 2>/dev/null || true)
	[ -n "$fqdn" ] && printf '%s\n' "$fqdn"
	[ -n "$short" ] && printf '%s\n' "$short"
	printf '%s\n' localhost 127.0.0.1
	if command -v ip >/dev/null; then
		ip -4 -o addr show 2>/dev/null | awk '{ split($4, a, "/"); print a[1] }'
	else
		for a in $(hostname -I 2>/dev/null || true); do is_ipv4 "$a" && printf '%s\n' "$a"; done
	fi
	# virbr0 (libvirt's default NAT network) is how pods on this host reach libvirtd. When the
	# network is not started yet, its address is still in the network definition.
	local net=$ROOT/etc/libvirt/qemu/networks/default.xml
	if [ -r "$net" ] && grep -q "<bridge[^>]*name=['\"]virbr0['\"]" "$net"; then
		sed -n "s/.*<ip[^>]*address=['\"]\([0-9.]*\)['\"].*/\1/p" "$net" | head -1
	fi
}

if [ ${#SANS[@]} -eq 0 ]; then
	mapfile -t SANS < <(default_sans)
fi
SANS+=("${EXTRA_SANS[@]}")
# Validate, lower-case DNS names, drop duplicates, keep order.
declare -A seen=()
SAN_LIST=()
for s in "${SANS[@]}"; do
	[ -n "$s" ] || continue
	if is_ipv4 "$s" || is_ipv6 "$s"; then
		:
	elif is_dns "$s"; then
		s=${s,,}
		s=${s%.}
	else
		die "'$s' is neither an IP address nor a valid DNS name (--san/--extra-san)"
	fi
	[ -n "${seen[$s]:-}" ] && continue
	seen[$s]=1
	SAN_LIST+=("$s")
done
[ ${#SAN_LIST[@]} -gt 0 ] || die "no server names: pass at least one --san"

# The server certificate's CN: the first DNS name that is not localhost, else the first SAN.
SERVER_CN=${SAN_LIST[0]}
for s in "${SAN_LIST[@]}"; do
	if ! is_ipv4 "$s" && ! is_ipv6 "$s" && [ "$s" != localhost ]; then
		SERVER_CN=$s
		break
	fi
done

san_ext() {
	local s out=""
	for s in "${SAN_LIST[@]}"; do
		if is_ipv4 "$s" || is_ipv6 "$s"; then out+=",IP:$s"; else out+=",DNS:$s"; fi
	done
	printf '%s' "${out#,}"
}

# ------------------------------------------------------------------------------- PKI helpers
# subj CN — an -subj argument with the characters openssl treats specially escaped.
subj() {
	local cn=$1
	cn=${cn//\\/\\\\}
	cn=${cn//\//\\/}
	cn=${cn//+/\\+}
	cn=${cn//=/\\=}
	printf '/O=banlieue/CN=%s' "$cn"
}

# new_key FILE — an RSA key (RSA keeps GnuTLS' key-usage checks in libvirt straightforward).
new_key() {
	(umask 077 && run openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:"$KEY_BITS" -out "$1") ||
		die "openssl could not generate a key"
}

serial() { printf '0x%s' "$(openssl rand -hex 16)"; }

# install_file SRC DEST MODE — copy into place atomically with the given mode.
install_file() {
	local dest=$2 tmp
	tmp=$(mktemp "$(dirname "$dest")/.${dest##*/}.XXXXXX")
	cat "$1" >"$tmp"
	chmod "$3" "$tmp"
	mv -f "$tmp" "$dest"
}

# pubkey_of_cert CERT / pubkey_of_key KEY — the public key, to check that a pair belongs together.
pubkey_of_cert() { openssl x509 -noout -pubkey -in "$1" 2>/dev/null; }
pubkey_of_key() { openssl pkey -pubout -in "$1" 2>/dev/null; }
pair_ok() {
	local c k
	c=$(pubkey_of_cert "$1") && k=$(pubkey_of_key "$2") && [ -n "$c" ] && [ "$c" = "$k" ]
}

# leaf_ok CERT KEY PURPOSE [SAN...] — the certificate exists, pairs with KEY, chains to the
# current CA, is valid for PURPOSE beyond the renewal window, and covers every SAN given.
# On failure the reason is left in $why.
why=""
leaf_ok() {
	local cert=$1 key=$2 purpose=$3 s
	shift 3
	[ -s "$cert" ] || { why="missing"; return 1; }
	[ -s "$key" ] || { why="its key is missing"; return 1; }
	pair_ok "$cert" "$key" || { why="it does not match its key"; return 1; }
	openssl x509 -noout -checkend "$RENEW_SECS" -in "$cert" >/dev/null 2>&1 ||
		{ why="it expires within $((RENEW_SECS / 86400)) days"; return 1; }
	openssl verify -CAfile "$CA_CERT" -purpose "$purpose" "$cert" >/dev/null 2>&1 ||
		{ why="it is not signed by $CA_CERT (or not valid for $purpose)"; return 1; }
	for s in "$@"; do
		if is_ipv4 "$s" || is_ipv6 "$s"; then
			openssl verify -CAfile "$CA_CERT" -verify_ip "$s" "$cert" >/dev/null 2>&1 ||
				{ why="it does not cover $s"; return 1; }
		elif [[ $s == \*.* ]]; then
			openssl x509 -noout -text -in "$cert" 2>/dev/null | grep -Fq "DNS:$s" ||
				{ why="it does not cover $s"; return 1; }
		else
			openssl verify -CAfile "$CA_CERT" -verify_hostname "$s" "$cert" >/dev/null 2>&1 ||
				{ why="it does not cover $s"; return 1; }
		fi
	done
}

# issue KEY CERT CN EXTFILE — a new key and a certificate for it signed by the CA.
issue() {
	local key=$1 cert=$2 cn=$3 ext=$4 tmpkey=$WORK/new-key.pem
	rm -f "$tmpkey"
	new_key "$tmpkey"
	run openssl req -new -key "$tmpkey" -subj "$(subj "$cn")" -out "$WORK/req.csr" ||
		die "openssl could not create a certificate request for '$cn'"
	run openssl x509 -req -in "$WORK/req.csr" -CA "$CA_CERT" -CAkey "$CA_KEY" -set_serial "$(serial)" \
		-days "$DAYS" -sha256 -extfile "$ext" -out "$WORK/new-cert.pem" ||
		die "openssl could not sign the certificate for '$cn'"
	install_file "$tmpkey" "$key" 600
	install_file "$WORK/new-cert.pem" "$cert" 644
	rm -f "$tmpkey" "$WORK/req.csr" "$WORK/new-cert.pem"
}

mkdir -p "$CA_DIR" "$LV_DIR" || die "cannot create $CA_DIR or $LV_DIR"
mkdir -p "$CA_DIR/private" "$LV_DIR/private"
chmod 700 "$CA_DIR/private" "$LV_DIR/private"

# ------------------------------------------------------------------------------- CA
ca_created=0
if [ "$ROTATE_CA" = 1 ] && [ -e "$CA_CERT" ]; then
	stamp=$(date +%Y%m%d%H%M%S)
	mv "$CA_CERT" "$CA_CERT.replaced-$stamp"
	[ -e "$CA_KEY" ] && mv "$CA_KEY" "$CA_KEY.replaced-$stamp"
	say "--rotate-ca: old CA kept as $CA_CERT.replaced-$stamp"
fi
if [ ! -s "$CA_CERT" ]; then
	[ -e "$CA_KEY" ] && mv "$CA_KEY" "$CA_KEY.orphan-$(date +%Y%m%d%H%M%S)"
	cat >"$WORK/ca.ext" <<-'EOF'
		basicConstraints = critical, CA:TRUE
		keyUsage = critical, keyCertSign, cRLSign
		subjectKeyIdentifier = hash
	EOF
	new_key "$WORK/ca-key.pem"
	run openssl req -new -key "$WORK/ca-key.pem" -subj "$(subj "banlieue libvirt CA ($SERVER_CN)")" \
		-out "$WORK/ca.csr" || die "openssl could not create the CA request"
	run openssl x509 -req -in "$WORK/ca.csr" -signkey "$WORK/ca-key.pem" -set_serial "$(serial)" \
		-days "$CA_DAYS" -sha256 -extfile "$WORK/ca.ext" -out "$WORK/ca-cert.pem" ||
		die "openssl could not self-sign the CA certificate"
	install_file "$WORK/ca-key.pem" "$CA_KEY" 600
	install_file "$WORK/ca-cert.pem" "$CA_CERT" 644
	rm -f "$WORK/ca-key.pem"
	ca_created=1
	say "created CA $CA_CERT"
else
	openssl x509 -noout -in "$CA_CERT" >/dev/null 2>&1 || die "$CA_CERT is not a PEM certificate; move it away or use --rotate-ca"
	say "keeping CA $CA_CERT"
	openssl x509 -noout -checkend 0 -in "$CA_CERT" >/dev/null 2>&1 ||
		die "the CA $CA_CERT has expired; run again with --rotate-ca"
	openssl x509 -noout -checkend 7776000 -in "$CA_CERT" >/dev/null 2>&1 ||
		warn "the CA $CA_CERT expires within 90 days; plan a --rotate-ca"
fi
chmod 600 "$CA_KEY" 2>/dev/null || true
chmod 644 "$CA_CERT"

need_ca_key() {
	[ -s "$CA_KEY" ] || die "a certificate has to be issued but the CA key $CA_KEY is missing; restore it, or run with --rotate-ca (all clients then need the new CA)"
	pair_ok "$CA_CERT" "$CA_KEY" || die "$CA_KEY does not belong to $CA_CERT; restore the right key, or run with --rotate-ca"
}

# ------------------------------------------------------------------------------- server
cat >"$WORK/server.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
subjectAltName = $(san_ext)
EOF
if [ "$ROTATE" = 1 ] || [ "$ca_created" = 1 ]; then
	why="rotation requested"
	[ "$ca_created" = 1 ] && why="new CA"
	reissue=1
elif leaf_ok "$SERVER_CERT" "$SERVER_KEY" sslserver "${SAN_LIST[@]}"; then
	reissue=0
else
	reissue=1
fi
if [ "$reissue" = 1 ]; then
	need_ca_key
	issue "$SERVER_KEY" "$SERVER_CERT" "$SERVER_CN" "$WORK/server.ext"
	say "issued server certificate $SERVER_CERT ($why) for: ${SAN_LIST[*]}"
	SERVER_CHANGED=1
else
	say "keeping server certificate $SERVER_CERT (covers: ${SAN_LIST[*]})"
	SERVER_CHANGED=0
fi

# ------------------------------------------------------------------------------- client
cat >"$WORK/client.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
EOF
if [ "$ROTATE" = 1 ] || [ "$ca_created" = 1 ]; then
	why="rotation requested"
	[ "$ca_created" = 1 ] && why="new CA"
	reissue=1
elif leaf_ok "$CLIENT_CERT" "$CLIENT_KEY" sslclient; then
	reissue=0
	current_cn=$CLIENT_CN
	if [ "$CN_GIVEN" = 1 ]; then
		current_cn=$(openssl x509 -noout -subject -nameopt multiline -in "$CLIENT_CERT" 2>/dev/null |
			sed -n 's/^ *commonName *= *//p' || true)
	fi
	if [ "$current_cn" != "$CLIENT_CN" ]; then
		why="its CN is '$current_cn', not '$CLIENT_CN'"
		reissue=1
	fi
else
	reissue=1
fi
if [ "$reissue" = 1 ]; then
	need_ca_key
	issue "$CLIENT_KEY" "$CLIENT_CERT" "$CLIENT_CN" "$WORK/client.ext"
	say "issued client certificate $CLIENT_CERT ($why), CN=$CLIENT_CN"
	CLIENT_CHANGED=1
else
	say "keeping client certificate $CLIENT_CERT"
	CLIENT_CHANGED=0
fi
chmod 644 "$SERVER_CERT" "$CLIENT_CERT"
chmod 600 "$SERVER_KEY" "$CLIENT_KEY"

# ------------------------------------------------------------------------------- libvirtd.conf
# set_conf_keys IN OUT — for each wanted key: the first active line is replaced in place, later
# active duplicates are dropped; with no active line, the setting goes right after its
# commented-out template (as shipped by libvirt), else at the end of the file.
set_conf_keys() {
	awk -v want='listen_tls=1|listen_tcp=0|auth_tls="none"' '
		BEGIN {
			n = split(want, pairs, "|")
			for (i = 1; i <= n; i++) {
				k = substr(pairs[i], 1, index(pairs[i], "=") - 1)
				v = substr(pairs[i], index(pairs[i], "=") + 1)
				keys[i] = k; val[k] = v
			}
		}
		{ lines[NR] = $0 }
		END {
			for (i = 1; i <= NR; i++) {
				for (j = 1; j <= n; j++) {
					k = keys[j]
					if (lines[i] ~ "^[ \t]*" k "[ \t]*=") {
						if (!(k in active)) active[k] = i; else drop[i] = 1
					} else if (lines[i] ~ "^[ \t]*#[ \t]*" k "[ \t]*=" && !(k in template)) {
						template[k] = i
					}
				}
			}
			for (j = 1; j <= n; j++) {
				k = keys[j]
				if (k in active) repl[active[k]] = k " = " val[k]
				else if (k in template) after[template[k]] = after[template[k]] k " = " val[k] "\n"
				else tail = tail k " = " val[k] "\n"
			}
			for (i = 1; i <= NR; i++) {
				if (i in drop) continue
				print ((i in repl) ? repl[i] : lines[i])
				if (i in after) printf "%s", after[i]
			}
			if (tail != "") {
				if (NR > 0) print ""
				print "# mutual TLS for banlieue (scripts/bootstrap-libvirt-tls.sh)"
				printf "%s", tail
			}
		}' "$1" >"$2"
}

mkdir -p "$(dirname "$CONF")"
CONF_CHANGED=0
if [ -e "$CONF" ]; then
	cp -p "$CONF" "$WORK/libvirtd.conf.in"
else
	: >"$WORK/libvirtd.conf.in"
fi
set_conf_keys "$WORK/libvirtd.conf.in" "$WORK/libvirtd.conf.out"
if [ ! -e "$CONF" ] || ! cmp -s "$WORK/libvirtd.conf.in" "$WORK/libvirtd.conf.out"; then
	if [ -e "$CONF" ] && [ ! -e "$CONF.banlieue-orig" ]; then
		cp -p "$CONF" "$CONF.banlieue-orig"
		say "saved the original as $CONF.banlieue-orig"
	fi
	mode=644
	[ -e "$CONF" ] && mode=$(stat -c %a "$CONF")
	install_file "$WORK/libvirtd.conf.out" "$CONF" "$mode"
	CONF_CHANGED=1
	say "updated $CONF: listen_tls = 1, listen_tcp = 0, auth_tls = \"none\""
else
	say "$CONF already has listen_tls = 1, listen_tcp = 0, auth_tls = \"none\""
fi
# Settings that would make libvirtd ignore what was just set up.
for k in key_file cert_file ca_file tls_allowed_dn_list; do
	line=$(grep -E "^[[:space:]]*${k}[[:space:]]*=" "$CONF" | head -1 || true)
	[ -n "$line" ] && warn "$CONF sets '$line'; the files above are only used with libvirt's default paths and no DN restriction"
done
if grep -Eq '^[[:space:]]*tls_no_verify_certificate[[:space:]]*=[[:space:]]*1' "$CONF"; then
	warn "$CONF sets tls_no_verify_certificate = 1: client certificates are not checked"
fi

# ------------------------------------------------------------------------------- client copies
INVOKER=root
if [ "$IS_ROOT" = 1 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && getent passwd "$SUDO_USER" >/dev/null; then
	INVOKER=$SUDO_USER
elif [ "$IS_ROOT" = 0 ]; then
	INVOKER=$(id -un)
fi
INVOKER_HOME=$(getent passwd "$INVOKER" | cut -d: -f6)
[ -n "$INVOKER_HOME" ] || INVOKER_HOME=$HOME
INVOKER_GROUP=$(id -gn "$INVOKER")
[ -n "$CLIENT_DIR" ] || CLIENT_DIR=$INVOKER_HOME/.config/banlieue/libvirt

# The client directory belongs to the invoking user, who may have planted anything in it. So
# everything done inside it runs as that user (as_invoker): the kernel then lets a symlink there
# lead only to what the user could change anyway. The checks (must_be_dir, must_be_regular) are
# for a clear message; running as the user is the guarantee.
as_invoker() {
	if [ "$IS_ROOT" = 1 ] && [ "$INVOKER" != root ]; then
		runuser -u "$INVOKER" -- "$@"
	else
		"$@"
	fi
}
if [ "$IS_ROOT" = 1 ] && [ "$INVOKER" != root ]; then
	command -v runuser >/dev/null || die "runuser is not installed (util-linux); it writes the client credentials as $INVOKER"
fi

# Create the directory one level at a time so that every directory this script makes under
# the user's home (e.g. ~/.config) belongs to the user, not to root: as the user where the user
# may, else (a parent only root may write, e.g. a home owned by root) as root, handing it over
# with chown -h, which never follows a link. Existing directories are never chowned: reached
# through a link the user planted, that could hand the user a system directory.
mk_owned_dir() {
	local d=$1 parent
	[ -d "$d" ] && return 0
	parent=$(dirname "$d")
	[ "$parent" = "$d" ] || mk_owned_dir "$parent" || return 1
	as_invoker mkdir "$d" 2>/dev/null && return 0
	# Root steps in only under a parent root owns that is reached without a link.
	[ "$IS_ROOT" = 1 ] && [ "$(stat -c %u -- "$parent/")" = 0 ] &&
		[ "$(cd -P -- "$parent" && pwd)" = "$(cd -- "$parent" && pwd)" ] || return 1
	mkdir "$d" && chown -h "$INVOKER:$INVOKER_GROUP" "$d"
}
must_be_dir "$CLIENT_DIR"
mk_owned_dir "$CLIENT_DIR" || die "cannot create $CLIENT_DIR as $INVOKER"
CLIENT_DIR=$(cd "$CLIENT_DIR" && pwd)
as_invoker chmod 700 "$CLIENT_DIR" || die "cannot chmod 700 $CLIENT_DIR as $INVOKER: it must belong to $INVOKER"

# copy_out SRC NAME MODE — write SRC into the client directory as the invoking user: a new file,
# its mode set, renamed over NAME. No chmod or chown ever lands on an existing name there.
copy_out() {
	local dest=$CLIENT_DIR/$2
	must_be_regular "$dest"
	# shellcheck disable=SC2016 # expanded by the inner shell
	as_invoker bash -c 'set -e; umask 077; tmp=$(mktemp "$1/.$2.XXXXXX"); trap "rm -f \"\$tmp\"" ERR
		cat >"$tmp"; chmod "$3" "$tmp"; mv -f "$tmp" "$1/$2"' copy_out "$CLIENT_DIR" "$2" "$3" <"$1" ||
		die "cannot write $dest as $INVOKER"
}
copy_out "$CA_CERT" cacert.pem 644
copy_out "$CLIENT_CERT" clientcert.pem 644
copy_out "$CLIENT_KEY" clientkey.pem 600
say "client credentials in $CLIENT_DIR (owner $INVOKER)"

# ------------------------------------------------------------------------------- services
# stop_pidfile NAME FILE — stop a daemon by its PID file: SIGTERM, SIGKILL after 15 s.
stop_pidfile() {
	local pid
	[ -s "$2" ] || return 0
	pid=$(tr -dc 0-9 <"$2")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	say "stopping $1 (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 150); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	warn "$1 (pid $pid) ignored SIGTERM; killing it"
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

restart_systemd() {
	local f
	systemctl cat libvirtd.service >/dev/null 2>&1 ||
		die "systemd has no libvirtd.service; install libvirt-daemon-system (Debian/Ubuntu) or libvirt-daemon (RHEL/Fedora). Hosts that run only the modular daemons (virtqemud + virtproxyd) are not handled by this script."
	for f in /etc/default/libvirtd /etc/sysconfig/libvirtd; do
		if [ -r "$f" ] && grep -Eq '^[[:space:]]*LIBVIRTD_ARGS=.*--listen' "$f"; then
			die "$f passes --listen to libvirtd, which libvirtd refuses under socket activation; remove --listen from LIBVIRTD_ARGS and run again"
		fi
	done
	say "systemd: stopping libvirtd.service, enabling the sockets, starting libvirtd.service"
	run systemctl stop libvirtd.service || die "systemctl stop libvirtd.service failed"
	run systemctl enable libvirtd.socket libvirtd-ro.socket libvirtd-admin.socket libvirtd-tls.socket ||
		die "systemctl enable of the libvirtd sockets failed (is libvirtd-tls.socket installed?)"
	# A restart picks up a changed ListenStream for a socket that was already running.
	run systemctl restart libvirtd.socket libvirtd-ro.socket libvirtd-admin.socket libvirtd-tls.socket ||
		die "starting the libvirtd sockets failed; see: journalctl -u libvirtd-tls.socket"
	run systemctl enable libvirtd.service || warn "systemctl enable libvirtd.service failed"
	run systemctl start libvirtd.service || die "libvirtd.service did not start; see: journalctl -u libvirtd.service"
}

restart_plain() {
	local pidfile=/run/libvirtd.pid
	command -v libvirtd >/dev/null || die "libvirtd is not installed"
	if ! { [ -s /run/virtlogd.pid ] && kill -0 "$(tr -dc 0-9 </run/virtlogd.pid)" 2>/dev/null; }; then
		if command -v virtlogd >/dev/null; then
			say "starting virtlogd"
			run virtlogd --daemon || die "virtlogd did not start"
		else
			warn "virtlogd is not installed; QEMU guests will not start without it"
		fi
	fi
	getent passwd libvirt-qemu >/dev/null || getent passwd qemu >/dev/null ||
		warn "neither a libvirt-qemu nor a qemu user exists; libvirt's QEMU driver will refuse to load"
	stop_pidfile libvirtd "$pidfile"
	say "no systemd: starting libvirtd --listen --daemon"
	run libvirtd --listen --daemon || die "libvirtd did not start; see /var/log/libvirt/libvirtd.log or run 'libvirtd --listen' in the foreground"
	for _ in $(seq 100); do
		[ -s "$pidfile" ] && return 0
		sleep 0.1
	done
	die "libvirtd did not write $pidfile"
}

# The address to self-check over: 127.0.0.1 when the certificate covers it.
CHECK_HOST=$SERVER_CN
for s in "${SAN_LIST[@]}"; do [ "$s" = 127.0.0.1 ] && CHECK_HOST=127.0.0.1; done

# answers_tls — libvirtd accepts this client over TLS (virsh uri: no slow capability probe).
uri="qemu+tls://$CHECK_HOST/system?pkipath=$CLIENT_DIR"
answers_tls() { command -v virsh >/dev/null && timeout 20 virsh -q -c "$uri" uri >"$WORK/out" 2>&1; }

if [ "$RESTART" = 1 ]; then
	unchanged=0
	if [ "$SERVER_CHANGED$CLIENT_CHANGED$CONF_CHANGED" = 000 ] && answers_tls; then
		if [ ! -d /run/systemd/system ] || systemctl is-enabled --quiet libvirtd-tls.socket 2>/dev/null; then
			unchanged=1
		fi
	fi
	if [ "$unchanged" = 1 ]; then
		say "nothing changed and libvirtd already answers over TLS: not restarting it"
		RESTART=0
	elif [ -d /run/systemd/system ]; then
		restart_systemd
	else
		restart_plain
	fi
fi
if [ "$RESTART" = 1 ]; then
	if command -v virsh >/dev/null; then
		ok=0
		for _ in $(seq 30); do
			if answers_tls; then
				ok=1
				break
			fi
			sleep 0.5
		done
		if [ "$ok" = 1 ]; then
			say "libvirtd answers over TLS at $CHECK_HOST:16514"
		else
			sed 's/^/    /' "$WORK/out" >&2
			die "libvirtd does not answer over TLS ($uri); check its log and that port 16514 is open"
		fi
	else
		warn "virsh is not installed (libvirt-clients): skipped checking that libvirtd answers over TLS"
	fi
else
	if [ "$SERVER_CHANGED$CLIENT_CHANGED$CONF_CHANGED" != 000 ]; then
		say "not restarting libvirt (--no-restart/--root); restart it to pick up the changes"
	fi
fi

# ------------------------------------------------------------------------------- next steps
if [ "$CLIENT_DIR" = "$INVOKER_HOME/.config/banlieue/libvirt" ]; then
	# shellcheck disable=SC2016 # printed for the user's shell to expand
	CRED='$HOME/.config/banlieue/libvirt'
	SCP_SRC=.config/banlieue/libvirt/
else
	CRED=$CLIENT_DIR
	SCP_SRC=$CLIENT_DIR/
fi
ROOT_HINT=""
if [ -z "$ROOT" ]; then
	ROOT_HINT="   As root on this host the plain form works too (it reads /etc/pki):
     virsh -c \"qemu+tls://$SERVER_CN/system\" pool-list --all
"
fi
cat <<EOF

libvirtd TLS is set up. Server certificate names: ${SAN_LIST[*]}

Next steps:

1. Check that the host answers (here, or wherever you copy the credentials to; the host name
   must be one of the names above):

     virsh -c "qemu+tls://$SERVER_CN/system?pkipath=$CRED" pool-list --all

$ROOT_HINT   A hang rather than an error usually means a firewall is dropping port 16514.

2. Copy the credentials to the machine you run kubectl from, e.g.:
     scp -r $INVOKER@$SERVER_CN:$SCP_SRC ~/.config/banlieue/
   then create the Secret (client identity) and the ConfigMap (the CA that signed libvirtd):

     kubectl -n banlieue-system create secret generic libvirt-edge-creds \\
       --from-file=tls.crt="$CRED/clientcert.pem" \\
       --from-file=tls.key="$CRED/clientkey.pem"

     kubectl -n banlieue-system create configmap libvirt-edge-ca \\
       --from-file=ca.crt="$CRED/cacert.pem"
EOF
