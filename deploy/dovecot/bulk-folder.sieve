# bulkmilter: file mail the milter judged bulk into the Bulk folder.
#
# Run for every delivery before the user's own script (sieve_before in
# 90-bulkmilter.conf), so users keep their own rules for everything else.
# The milter removes any X-Bulk header a sender forged, so the header can be
# trusted on mail that came through the milter. Compile it once after every
# change, as root: sievec /etc/dovecot/sieve/bulk-folder.sieve
require ["fileinto", "mailbox"];

if header :matches "X-Bulk" "yes*" {
  # :create makes the folder on first use; the folder is subscribed when
  # lda_mailbox_autosubscribe = yes.
  fileinto :create "Bulk";
  stop;
}
