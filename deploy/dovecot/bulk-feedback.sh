#!/bin/sh
# bulk-feedback.sh KIND VOTER: send bulkmilter a user's feedback.
#
# Called by Dovecot's imapsieve scripts (report-not-bulk.sieve,
# report-bulk.sieve) through vnd.dovecot.pipe, with the message the user
# moved on stdin. KIND is "not-bulk" or "bulk", VOTER the user's address.
# It sends a short report that carries the header X-Bulk-Feedback: KIND and
# the message attached as message/rfc822, with VOTER as the envelope
# sender, through sendmail or SMTP (bulk-feedback.conf). The milter accepts
# it only from a trusted network (feedback.trusted_networks) and records
# the vote for VOTER on the attached message's signatures.
set -eu

KIND=${1:-}
VOTER=${2:-}

FEEDBACK_TO="bulk-feedback@localhost"
SENDMAIL="/usr/sbin/sendmail"
SMTP_URL=""
HEADER="X-Bulk-Feedback"
LOGIN_DOMAIN=""
conf="$(dirname "$0")/bulk-feedback.conf"
if [ -r "$conf" ]; then
	. "$conf"
fi

fail() {
	echo "bulk-feedback: $*" >&2
	exit 1
}

case "$KIND" in
not-bulk | bulk) ;;
*) fail "kind must be not-bulk or bulk, got '$KIND'" ;;
esac
case "$VOTER" in
"") fail "no voter" ;;
*[!A-Za-z0-9@._+=-]*) fail "unexpected characters in voter '$VOTER'" ;;
*@*) ;;
*)
	[ -n "$LOGIN_DOMAIN" ] || fail "voter '$VOTER' has no domain; set LOGIN_DOMAIN"
	VOTER="$VOTER@$LOGIN_DOMAIN"
	;;
esac

# A boundary the attached message cannot contain by chance.
boundary="=_bulk-feedback_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

report() {
	printf 'From: <%s>\n' "$VOTER"
	printf 'To: <%s>\n' "$FEEDBACK_TO"
	printf 'Subject: bulk feedback: %s\n' "$KIND"
	printf 'Date: %s\n' "$(LC_ALL=C date -R)"
	printf '%s: %s\n' "$HEADER" "$KIND"
	printf 'Auto-Submitted: auto-generated\n'
	printf 'MIME-Version: 1.0\n'
	printf 'Content-Type: multipart/mixed; boundary="%s"\n' "$boundary"
	printf '\n--%s\n' "$boundary"
	printf 'Content-Type: text/plain; charset=us-ascii\n\n'
	printf 'The user reported the attached message as %s.\n' "$KIND"
	printf '\n--%s\n' "$boundary"
	printf 'Content-Type: message/rfc822\nContent-Disposition: attachment\n\n'
	cat
	printf '\n--%s--\n' "$boundary"
}

if [ -n "$SMTP_URL" ]; then
	report | curl --silent --show-error --crlf --url "$SMTP_URL" \
		--mail-from "$VOTER" --mail-rcpt "$FEEDBACK_TO" --upload-file -
else
	# shellcheck disable=SC2086 # SENDMAIL may carry options
	report | $SENDMAIL -i -f "$VOTER" -- "$FEEDBACK_TO"
fi
