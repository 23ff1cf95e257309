# bulkmilter: file mail into the Bulk folder by its bulk level, each user
# at her own level (docs/levels.md).
#
# The milter adds X-Bulk-Level: 0 (not bulk) to 9 to every message and
# removes any a sender forged. A user's mail is filed from her level up:
#
#   strict   5  everything the verdict header calls bulk (X-Bulk: yes)
#   standard 6  ... but signed newsletters of a modest size
#   default  7  mass mail that does not declare itself, and big campaigns
#
# (Microsoft 365's Bulk Complaint Level thresholds.) The level comes from the
# plugin setting sieve_env_bulk_level, which the userdb may set per user
# (90-bulkmilter-level.conf); 7 when neither sets it.
#
# Run for every delivery before the user's own script (sieve_before), in
# place of bulk-folder.sieve. Compile it once after every change, as root:
# sievec /etc/dovecot/sieve/bulk-level.sieve
require ["fileinto", "mailbox", "relational", "comparator-i;ascii-numeric",
         "variables", "environment", "vnd.dovecot.environment"];

set "level" "7";
if environment :matches "vnd.dovecot.config.bulk_level" "*" {
  if string :is "${1}" ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"] {
    set "level" "${1}";
  }
}
if header :value "ge" :comparator "i;ascii-numeric" "X-Bulk-Level" "${level}" {
  # Level 0 never files: "ge 0" would take every message with the header.
  if not header :is "X-Bulk-Level" "0" {
    fileinto :create "Bulk";
    stop;
  }
}
