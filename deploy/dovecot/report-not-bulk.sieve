# bulkmilter feedback: a message moved OUT of the Bulk folder is "not bulk".
#
# Run by imapsieve (91-bulkmilter-feedback.conf) when a user moves or copies
# a message from Bulk to another folder. It hands the message to
# bulk-feedback.sh (in sieve_pipe_bin_dir), which sends it, attached, to the
# milter with the header X-Bulk-Feedback: not-bulk, as this user.
# Compile after every change, as root: sievec /etc/dovecot/sieve/report-not-bulk.sieve
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

# Moving bulk mail to the Trash says "I don't want it", not "it is not
# bulk": never learn from that (users of other filters got exactly this
# wrong, e.g. docker-mailserver#3334).
if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}
if anyof (string :is "${mailbox}" "Trash", string :is "${mailbox}" "Junk", string :is "${mailbox}" "Bulk") {
  stop;
}

# The voter: the user's address, else her login (bulk-feedback.conf can
# complete a login without a domain).
set "voter" "";
if environment :matches "imap.email" "*" { set "voter" "${1}"; }
if string :is "${voter}" "" {
  if environment :matches "imap.user" "*" { set "voter" "${1}"; }
}

pipe :copy "bulk-feedback.sh" ["not-bulk", "${voter}"];
