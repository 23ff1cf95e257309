// Package refile moves the first copies of a campaign into Bulk once the
// campaign crosses its threshold (issue 17). Counting needs a threshold
// of recipients before it can tag, so the copies delivered before it land
// in the inbox; refiling reaches back for them.
//
// It owns:
//   - the ledger: for each campaign, the copies delivered before it was
//     bulk (recipient, Message-ID), for at most the window, at most
//     Options.MaxPerCampaign copies per campaign and Options.MaxEntries in
//     all (the oldest go first). These are real addresses: the ledger only
//     exists when refiling is enabled, and lives in memory and in
//     Options.File;
//   - the queue of move jobs, one per campaign that crossed, written to
//     Options.File + ".queue" soon after every change so that it survives
//     a restart (the ledger is written every Options.SaveEvery: a crash
//     loses at most that much of it; every drop is counted);
//   - the workers that run the jobs off the milter's hot path, with
//     bounded retries and exponential backoff;
//   - the movers: Dovecot's doveadm HTTP API, the doveadm command, and a
//     hook (a command or a URL that receives the copies as JSON).
//
// The rules that keep mail safe: a copy is moved with MOVE, never copied
// and deleted; only from INBOX, so a copy that is not in the inbox any
// more (the user filed it, or a retry after a timeout already moved it)
// is skipped, not an error; a recipient who voted "not bulk" on the
// campaign is never moved (Votes is asked at move time).
//
// The daemon hands it a campaign name and the "bulk now" signal
// (Remember for copies before the threshold, Crossed for a bulk one),
// both taken from a detect.Verdict by CampaignOf and Crossed, which the
// evaluation (lab/eval) uses too. It imports detect and signature for
// that, and knows nothing of the store or the milter. Metrics go through
// Observer.
package refile
