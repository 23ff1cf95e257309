# bulkmilter feedback: a message moved INTO the Bulk folder is "bulk".
#
# Run by imapsieve (91-bulkmilter-feedback.conf) when a user moves or copies
# a message into Bulk. It hands the message to bulk-feedback.sh (in
# sieve_pipe_bin_dir), which sends it, attached, to the milter with the
# header X-Bulk-Feedback: bulk, as this user.
# Compile after every change, as root: sievec /etc/dovecot/sieve/report-bulk.sieve
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

set "voter" "";
if environment :matches "imap.email" "*" { set "voter" "${1}"; }
if string :is "${voter}" "" {
  if environment :matches "imap.user" "*" { set "voter" "${1}"; }
}

pipe :copy "bulk-feedback.sh" ["bulk", "${voter}"];
