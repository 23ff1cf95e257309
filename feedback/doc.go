// Package feedback turns users' "not bulk" and "bulk" reports into votes.
//
// A report is a message carrying the feedback header (feedback.header,
// default X-Bulk-Feedback) with the value "not-bulk" or "bulk", sent for
// example by a Dovecot imapsieve script when a user moves mail out of or
// into the Bulk folder (deploy/dovecot). The reported message is the
// first attached message/rfc822 or message/global part, found by
// mailtext.Attached (the MIME walk the pipeline uses) and read by a
// detect.Builder as if the MTA had sent it, else the report itself. Its
// keys are computed by the same pipeline as the daemon's (detect.Engine.Analyze),
// with the voter as the recipient, so that the recipient-stripping and the
// keys match those of the copy the user received; the verdict subject tag
// is removed first.
//
// Trust: a report counts only from a SASL-authenticated sender
// (feedback.trust_authenticated; the voter is the login) or from a client
// in feedback.trusted_networks (the voter is the envelope sender, which
// the trusted host sets to the user it acts for). Anything in the message
// itself (From, Delivered-To, To) is never used to pick the voter: a user
// can put anything in a message, and only the submission's identity is
// vouched for. An untrusted report is ordinary mail; the milter removes the
// header. Votes are per voter, on the reported message's keys and on the
// campaign they were counted in (the store finds it): a voter's vote
// exempts only her own later mail with those keys or of that campaign,
// and changes everybody's verdict only once feedback.global_voters
// distinct voters agree on a key or on the campaign (see package detect),
// so a spammer who is not a trusted user cannot vote at all, and one
// trusted account cannot whitelist a campaign for others.
//
// Each voter may cast feedback.rate_limit votes per hour (a token bucket
// of that size, refilled at that rate), counted in this process: see
// Limiter.
//
// The milter hands reports to Handler.Handle; this package defines Report
// and Outcome and imports neither milter nor config (Options are typed).
// It may import detect, mailtext, signature, store and internal/ratelog.
package feedback
