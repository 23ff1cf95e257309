#!/usr/bin/env bash
# Installs the external programs bulkmilter's integration tests start
# (see internal/testenv): redis-server and redis-cli, Postfix, swaks,
# miltertest, Dovecot (LMTP, Sieve, IMAP), OpenDKIM, promtool, systemd's offline tools,
# Rspamd (the peer row of `bulklab bench`), and an unpacked copy of Sendmail
# for the Sendmail tests.
#
# Idempotent: packages already installed are left alone, and apt-get update
# runs only when something has to be installed. Works as root (CI, no
# terminal) or as a user with sudo. The tests never use the system services
# these packages bring; any daemon an install starts is stopped again.
#
# Sendmail cannot be installed next to Postfix (the packages conflict), so its
# .debs are downloaded and unpacked with dpkg -x into a cache directory
# instead: $BULKMILTER_SENDMAIL_DIR, default
# ${XDG_CACHE_HOME:-$HOME/.cache}/bulkmilter/sendmail. The binary is then
# $BULKMILTER_SENDMAIL_DIR/usr/libexec/sendmail/sendmail (Debian 12; older
# releases used usr/lib/sm.bin/sendmail, which is also accepted).
#
# Usage: scripts/install-test-deps.sh [--no-sendmail | --sendmail-only]
set -euo pipefail

PACKAGES=(
	redis-server redis-tools
	postfix
	swaks
	miltertest
	dovecot-core dovecot-lmtpd dovecot-sieve dovecot-imapd
	opendkim # the DKIM verifier in front of the milter (declared bulk)
	prometheus # for promtool
	systemd    # systemd-analyze, -sysusers, -tmpfiles check deploy/systemd (nothing is started)
	rspamd     # the peer milter of bulklab bench (lab/bench/rspamd.go starts its own)
	ca-certificates
)
# The system service a fresh install of a package may start. The tests run
# their own instances on free ports and must not meet these; services of
# packages that were already installed are left alone.
declare -A SERVICE_OF=(
	[redis-server]=redis-server
	[postfix]=postfix
	[dovecot-core]=dovecot
	[opendkim]=opendkim
	[prometheus]=prometheus
	[rspamd]=rspamd
)

SENDMAIL_DIR="${BULKMILTER_SENDMAIL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/bulkmilter/sendmail}"
SENDMAIL_PACKAGES=(sendmail-bin sendmail-cf)

TMP_DIRS=()
cleanup() { [[ ${#TMP_DIRS[@]} -eq 0 ]] || rm -rf "${TMP_DIRS[@]}"; }
trap cleanup EXIT

log() { printf 'install-test-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ $(id -u) -eq 0 ]]; then
	SUDO=()
elif command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
else
	SUDO=(__no_sudo__) # fails loudly only if a privileged step is needed
fi

as_root() {
	if [[ ${SUDO[0]:-} == __no_sudo__ ]]; then
		die "need root for: $* (run as root or install sudo)"
	fi
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive "$@"
}

installed() {
	[[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) == ii* ]]
}

APT_UPDATED=0
apt_update_once() {
	if [[ $APT_UPDATED -eq 0 ]]; then
		log "apt-get update"
		as_root apt-get update -q
		APT_UPDATED=1
	fi
}

# install_missing PKG... installs the packages that are not installed yet and
# prints the names of those it installed.
install_missing() {
	local missing=() p
	for p in "$@"; do
		installed "$p" || missing+=("$p")
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	apt_update_once
	log "apt-get install ${missing[*]}"
	as_root apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
	printf '%s\n' "${missing[@]}"
}

# stop_services PKG... stops (and on systemd disables) the system daemons
# that the freshly installed packages may have started. policy-rc.d often
# prevented the start already; failures here are expected and ignored.
stop_services() {
	local p s
	for p in "$@"; do
		s=${SERVICE_OF[$p]:-}
		[[ -n $s ]] || continue
		if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1; then
			if systemctl cat "$s.service" >/dev/null 2>&1; then
				log "systemctl disable --now $s (installed just now; tests do not use it)"
				as_root systemctl disable --now "$s.service" >/dev/null 2>&1 || true
			fi
		elif [[ -x /etc/init.d/$s ]]; then
			log "stopping $s (installed just now; tests do not use it)"
			as_root /etc/init.d/"$s" stop >/dev/null 2>&1 || true
		fi
	done
}

install_packages() {
	# Postfix must not ask which kind of mail system this is; the tests write
	# their own main.cf per instance and never use /etc/postfix/main.cf.
	if ! installed postfix; then
		echo "postfix postfix/main_mailer_type select No configuration" |
			as_root debconf-set-selections
	fi
	local new
	new=$(install_missing "${PACKAGES[@]}")
	if [[ -n $new ]]; then
		# shellcheck disable=SC2086 # one package name per word
		stop_services $new
	else
		log "all packages already installed: ${PACKAGES[*]}"
	fi
	local prog
	for prog in redis-server redis-cli swaks miltertest promtool systemd-analyze systemd-sysusers systemd-tmpfiles rspamd rspamadm; do
		command -v "$prog" >/dev/null 2>&1 || die "$prog missing after install"
	done
	for prog in /usr/sbin/postfix /usr/lib/postfix/sbin/master /usr/lib/postfix/sbin/smtpd \
		/usr/sbin/postqueue /usr/sbin/dovecot /usr/lib/dovecot/lmtp; do
		[[ -x $prog ]] || die "$prog missing after install"
	done
	getent passwd postfix >/dev/null || die "user postfix missing after install"
	getent group postdrop >/dev/null || die "group postdrop missing after install"
}

# sendmail_bin prints the unpacked sendmail binary's path, if any.
sendmail_bin() {
	local b
	for b in usr/libexec/sendmail/sendmail usr/lib/sm.bin/sendmail; do
		if [[ -x $SENDMAIL_DIR/$b ]]; then
			printf '%s\n' "$SENDMAIL_DIR/$b"
			return 0
		fi
	done
	return 1
}

# sendmail_version prints the version of the unpacked sendmail, or fails.
sendmail_version() {
	local bin out
	bin=$(sendmail_bin) || return 1
	# -d0.1 prints the version and compile options at once; -C/dev/null keeps
	# it away from any /etc/mail configuration. On a host whose name is not
	# qualified (no dot, and none via /etc/hosts or DNS) sendmail then logs
	# "My unqualified host name ... sleeping for retry" and sleeps 60s, so
	# only the first seconds are waited for.
	out=$(timeout 3 "$bin" -C/dev/null -d0.1 -bt </dev/null 2>&1) || true
	if [[ $out != *"Version 8."* ]]; then
		log "$bin -d0.1 -bt printed no version:"
		printf '%s\n' "$out" >&2
		return 1
	fi
	printf '%s\n' "$out" | sed -n 's/^Version //p' | head -n 1
}

# fetch_sendmail downloads sendmail-bin and sendmail-cf with apt-get download
# and unpacks them with dpkg -x into $SENDMAIL_DIR (no dpkg database entry,
# so no conflict with Postfix). Their shared-library dependencies and m4 (to
# build sendmail.cf from a .mc file) are installed as normal packages.
fetch_sendmail() {
	local libs
	libs=$(apt-cache depends sendmail-bin 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^lib/ {print $2}' | sort -u || true)
	if [[ -z $libs ]]; then
		apt_update_once
		libs=$(apt-cache depends sendmail-bin | awk '$1 == "Depends:" && $2 ~ /^lib/ {print $2}' | sort -u)
	fi
	# shellcheck disable=SC2086 # one package name per word
	install_missing m4 $libs >/dev/null

	# The stamp saves the 3s version check on every later run.
	if [[ -f $SENDMAIL_DIR/.verified ]] && sendmail_bin >/dev/null; then
		log "sendmail already unpacked in $SENDMAIL_DIR ($(cat "$SENDMAIL_DIR/.verified"))"
		return 0
	fi
	local tmp
	tmp=$(mktemp -d)
	TMP_DIRS+=("$tmp")
	# apt's download sandbox user must be able to write here when root runs us.
	if [[ $(id -u) -eq 0 ]] && getent passwd _apt >/dev/null; then
		chown _apt "$tmp"
	fi
	log "apt-get download ${SENDMAIL_PACKAGES[*]}"
	if ! (cd "$tmp" && apt-get download -q "${SENDMAIL_PACKAGES[@]}" >&2); then
		apt_update_once
		(cd "$tmp" && apt-get download -q "${SENDMAIL_PACKAGES[@]}" >&2)
	fi
	local root="$tmp/root" deb
	mkdir "$root"
	for deb in "$tmp"/*.deb; do
		log "dpkg -x $(basename "$deb")"
		dpkg -x "$deb" "$root"
	done
	# Replace only an earlier extraction or an empty directory, never
	# whatever else BULKMILTER_SENDMAIL_DIR might point at.
	if [[ -e $SENDMAIL_DIR ]]; then
		if [[ -f $SENDMAIL_DIR/.verified || -d $SENDMAIL_DIR/usr/libexec/sendmail || -d $SENDMAIL_DIR/usr/lib/sm.bin ||
			-z $(ls -A "$SENDMAIL_DIR") ]]; then
			rm -rf "$SENDMAIL_DIR"
		else
			die "$SENDMAIL_DIR exists and is not an earlier sendmail extraction; refusing to replace it"
		fi
	fi
	mkdir -p "$(dirname "$SENDMAIL_DIR")"
	mv "$root" "$SENDMAIL_DIR"
	local bin missing
	bin=$(sendmail_bin) || die "no sendmail binary in $SENDMAIL_DIR after dpkg -x"
	missing=$(ldd "$bin" | grep 'not found' || true)
	[[ -z $missing ]] || die "$bin has unresolved shared libraries: $missing"
	local version
	version=$(sendmail_version) || die "unpacked sendmail $bin does not run"
	printf 'sendmail %s\n' "$version" >"$SENDMAIL_DIR/.verified"
	log "sendmail $version unpacked: $bin"
}

main() {
	local do_packages=1 do_sendmail=1
	case "${1:-}" in
	"") ;;
	--no-sendmail) do_sendmail=0 ;;
	--sendmail-only) do_packages=0 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		return 0
		;;
	*) die "unknown argument $1 (use --no-sendmail or --sendmail-only)" ;;
	esac
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian and Ubuntu only"
	[[ $do_packages -eq 1 ]] && install_packages
	[[ $do_sendmail -eq 1 ]] && fetch_sendmail
	log "done"
}

main "$@"
