// Package declared tells mass mail that declares itself (a newsletter with
// RFC 8058 one-click unsubscribe, a list with List-Id, a sender's
// Precedence: bulk or an ESP's Feedback-ID) from mass mail that hides what
// it is.
//
// A header only counts as a declaration when a DKIM signature (RFC 6376)
// that covers it verified, as reported by an Authentication-Results field
// (RFC 8601) of the site's own authserv-id: anybody can write a
// List-Unsubscribe, only the signer's domain can sign it. The package
// parses both fields and matches each passing result to the signature it
// names (header.d, header.s and the header.b prefix against d=, s= and b=).
//
// Which Authentication-Results fields to trust is the caller's choice: the
// ones a verifier running before the milter inserted at the top of the
// header (RFC 8601 §5: fields with the site's authserv-id that came with
// the message are forged; the milter removes them).
//
// Pure: no I/O, logging or metrics. It imports nothing of bulkmilter.
package declared
