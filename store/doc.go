// Package store keeps the volume counters and the feedback votes behind the
// bulk verdict: for each campaign, how many distinct recipients got one of
// its copies within a sliding time window, and which users voted a
// signature "bulk" or "not bulk".
//
// Two implementations share one contract, tested by one conformance suite
// (package storetest) and by TestStoresAgree (the same random streams
// through both give the same results): Embedded, in process for a single
// host and the zero-configuration default, and Redis (one server, Sentinel
// or Cluster), shared by several MTAs. Keys handed to a store are opaque
// signature ids ("s1a2b…:imatch.3:00ab…"); the store owns their layout.
//
// # Campaigns (issue 15)
//
// A store counts campaigns, not keys (model.go holds the one model). Every
// key points to the campaign it was last seen in within the window. A
// message reads its keys' pointers; each family weighs the same whatever
// its number of keys; the message joins the campaign with the most
// evidence (any evidence: JoinEvidence, JoinShare), or starts its own, and
// then all its keys point to that campaign. Against chaining (a footer or
// a list template shared by unrelated mail) a key that voted in a weak
// join (less than WeakShare of the message's evidence, or one key joining a
// campaign whose only envelope sender is the message's: a sender's
// template) or moved between campaigns counts a weak event, and stops
// voting after WeakCap. A few line keys (under LinesShare of the
// message's) name a campaign only when none of them was last written by
// the message's sender, a strong join (spread lines: a short offer inside
// changing text, from a new sender each copy). A sender is the envelope sender's
// domain (Observation.Sender). The campaign's volume is
// its distinct recipients in the window. A campaign can split: its first
// copies share too little to find each other and start campaigns of their
// own. So a strong join also counts the other campaigns that UnionKeys or
// more of the message's voting keys still name (UnionShare, at most
// UnionMax): the message's recipients are counted in each, and its volume
// is the distinct recipients of them all (by 32-bit fingerprint while
// every one is exact; past that the largest count). The union itself is
// not kept: the keys then point to the joined campaign, so later copies
// converge on it, and a retried call finds the keys moved and counts the
// joined campaign alone (never a recipient twice). A campaign also knows
// its sending networks and envelope sender domains (exact up to CampaignSetCap,
// then saturating) and when it was first seen (Result.Campaign). A new
// campaign's ref is a hash of the message's keys (29 bits); when a live
// campaign started by other keys holds it, the next free ref is taken.
// Result.Volumes gives each key the campaign's volume when the key voted
// for the joined campaign (or the campaign is new), and the message's own
// recipients when the key is new to the campaign it joined.
//
// # Counting
//
// Time is cut into buckets of Window/Buckets (default 24h/4 = 6h), aligned
// on the Unix epoch; a message falls in the bucket of Observation.Time. The
// volume of a campaign at time t is the number of distinct recipients seen
// with it in the bucket of t and the Buckets buckets before: every
// recipient seen less than Window ago is counted, none seen
// Window+Window/Buckets ago or earlier is (the effective window is between
// 24h and 30h by default). A recipient seen again moves to the newer
// bucket. An observation or vote dated more than a bucket ahead of the
// store's clock is counted at the store's present (its latest counted
// time, or its clock when that is earlier), and a bucket ahead of the clock
// (a clock stepped back) gives its slot to the present (ahead.go).
// Recipients are normalised (trimmed, lower-cased) and counted once
// per campaign: the same newsletter twice to one person is 1, one message
// with 200 RCPT TO is 200. A key's pointer lives in the bucket it was last
// written in and is read over the same window.
//
// A campaign's count lives in one of three tiers, so that the many
// campaigns of one message cost little (see docs/performance.md):
//
//  1. First sighting: one message to one recipient so far. A 20-byte
//     record (the ref, 32 bits of the recipient's pseudonym, the first
//     time, the network's and sender's fingerprints, the origin): in Redis
//     in a string shared by many campaigns, in the embedded store in a
//     table per time bucket and shard (fsrec.go).
//  2. Exact set: from the second message up to ExactLimit (default 100)
//     recipients: a hash recipient → last bucket, plus per-bucket counts.
//     Exact: a threshold of 10 or 50 is decided on the true count. The
//     first recipient enters by its 32-bit fingerprint and is matched to
//     its full pseudonym when it shows up again.
//  3. HyperLogLog: past ExactLimit, one HyperLogLog per bucket; the count is
//     the union of the window's buckets (PFCOUNT over several keys; the
//     embedded store merges registers). 2¹⁴ registers, standard error
//     0.81%; Redis's estimator undercounts slightly in the low hundreds
//     (docs/performance.md has the measured profile: within ±3% at n ≥ 101).
//
// Hash collisions, all negligible next to the HyperLogLog error: two
// distinct recipients of one campaign share a 48-bit pseudonym with
// probability about n²/2⁴⁹ (n = 10⁵: 2·10⁻⁵); in Redis, a second recipient
// is taken for the first one when their 32-bit fingerprints match (2⁻³²
// per message), and a key matches another key's pointer with probability
// about (records per string)/2³² per lookup (about 5·10⁻⁸; the key then
// votes for a campaign it never saw). A retried call counts nothing twice:
// every write is idempotent (rewriting the same record or hash value,
// PFADD), and a retried message that started a campaign finds its keys
// pointing to it (Campaign.Joined is then set where the first call left it
// empty).
//
// # Votes
//
// A vote (user, kind, time) is stored on each key of the voted message; a
// later vote by the same user on a key replaces the earlier one, VoteNone
// retracts it. Feedback follows the campaign: the vote is also stored on
// the campaign the voted keys belong to (found by a read-only observation
// of them when the vote is cast; none when they are in no live campaign),
// under the vote id CampaignVoteKey ("campaign:" and the campaign's ID),
// so that it covers the campaign's later copies however edited. Observe
// returns the tally of the campaign the message joined and its
// recipients' campaign votes (Result.CampaignVotes, CampaignOwn) in the
// same round trip, unless the join was weak (a shared footer must not
// carry another mailing's votes). A campaign vote lasts VoteHorizon, or
// until a new campaign takes the campaign's ref, which is free only once
// the campaign left the window. A vote counts for VoteHorizon (default 180
// days) after it was cast. Observe returns, per key, the number of
// distinct users who voted not-bulk and bulk, and for each recipient of
// the message who voted on any of its keys, that user's most recent vote
// (Result.UserVotes) and her vote on each key (Result.OwnVotes), in the
// same round trip. Voters are identified by the same normalisation and
// pseudonym as recipients, so a user's login or address must be what the
// MTA sees as the recipient. Admin lists and removes votes by key, key
// prefix or voter.
//
// Stores never hold an address: recipients and voters are 48-bit SipHash
// pseudonyms keyed by Params.Secret. Without a secret a built-in key is
// used and someone reading the store can still test a guessed address.
// Changing the secret orphans every stored vote (the pseudonyms change);
// Redis refuses to start against a database used with another secret.
//
// # Redis key schema, version 2
//
// Every key starts with the optional Namespace and "bm2:" (version 1, the
// per-key counts, is left to expire; its votes are on ids of the previous
// signature set version). The hash tag is {tttt}, 4 hex digits: for a
// signature the top 14 bits of xxHash64(signature id), for a campaign the
// top 14 of its 29-bit ref. All keys of one signature share a tag, as do
// all keys of one campaign; the 16384 tags spread them over every slot.
//
//	bm2:meta                     hash: schema, bucket_ms, buckets, key_id (secret
//	                             fingerprint), fs_split. Written by the first
//	                             daemon; later daemons must match (fs_split is
//	                             adopted). No TTL.
//	bm2:{tttt}:kc:<s>            string: the newest key pointers of the current
//	                             bucket and split <s> (bits 32+ of the key's
//	                             hash mod fs_split): the bucket (4 bytes), the
//	                             lengths of the ko: string's 8 lanes (2 bytes
//	                             each, so that a key reads only its lane of
//	                             ko:), then 9-byte records in the order
//	                             written: 4 bytes of check (the low 31 bits
//	                             of the key's hash, the top bit set for a
//	                             support family's key: terms, contain; not
//	                             lines), 4 of the pointer (ref << 3 | the
//	                             key's campaign switches, saturating at 7)
//	                             and 1 of the class of the campaign's only
//	                             sender (model.go; a line key's: its writer's
//	                             sender's; 0 in a support record). A new
//	                             key's record is appended (APPEND: nothing is
//	                             rebuilt), a known key's rewritten in place
//	                             (SETRANGE). At most 48 records: the next
//	                             key's write, or the first write of a later
//	                             bucket, moves them to ko:, so that the
//	                             string stays small whatever the traffic. A
//	                             key rewritten here shadows its record in ko:.
//	bm2:{tttt}:ko:<s>            string: the same split's older pointers: the
//	                             current bucket's moved from kc: and the
//	                             window's earlier buckets', in 8 lanes: 4 of
//	                             the main records, then 4 of the support
//	                             records; a key's lane is the last byte of its
//	                             check mod 4. A lane is the window's buckets
//	                             newest first from kc:'s bucket up to its
//	                             oldest with records: a count byte a bucket,
//	                             then the records' checks, then their
//	                             pointers, each in that order and newest
//	                             first within a bucket: main 4 bytes of check
//	                             and 5 of pointer and class, support 2 (the
//	                             low 2 bytes of the check; a false match names
//	                             a campaign that a support key alone never
//	                             joins, ~1 % of support lookups at a million
//	                             messages a day) and 4.
//	                             At most FirstSightCap records a bucket and 255
//	                             a lane and bucket (past them a key is not
//	                             remembered in that bucket). A key reads only
//	                             its lane's counts and checks (GETRANGE, where
//	                             kc: says the lane lies and its length says
//	                             how many; checked: the counts must add up),
//	                             and a pointer only when its check is there;
//	                             strings of at most 512 bytes, and
//	                             lanes that fail the check, are read whole, in
//	                             one MGET (an older string that kc:'s lengths
//	                             do not fit is damaged: nothing is found in
//	                             it). A lookup reads two strings, not one
//	                             a bucket (until 2026-11 the pointers were in
//	                             p:<s>:<bucket>, one string a bucket, then in
//	                             pc:/po:, qc:/qo: and qn:/qs:, whose older
//	                             string had no lanes, then in ln:/ls:, whose
//	                             main records had no class, then in pn:/ps:,
//	                             whose current string was rebuilt for every
//	                             new key, then in rc:/ro:, whose lanes held
//	                             whole records; those expire with their
//	                             window). A current string a window or more
//	                             ahead of the clock (a clock stepped back)
//	                             gives its place, and its older records, to
//	                             the present.
//	bm2:{tttt}:f:<s>:<bucket>    string: campaign first sightings (split <s>:
//	                             the ref mod fs_split): 20-byte records, the ref,
//	                             4 bytes of the recipient's pseudonym, the first
//	                             time (unix s), the network's and the sender's
//	                             16-bit fingerprints, the origin. At most
//	                             FirstSightCap records.
//	bm2:{tttt}:x:<ref>           hash, per campaign of two or more messages
//	                             (<ref> in hex): exact set, 6-byte pseudonym (or
//	                             '~' and a 4-byte fingerprint) → last bucket, and
//	                             '#' → "bucket:count …"; or, in the HyperLogLog
//	                             tier, 'h' → "1"; always 't' (first time), 'n'
//	                             and 's' (packed 16-bit fingerprints of networks
//	                             and senders), 'o' (origin).
//	bm2:{tttt}:c:<ref>:<bucket>  HyperLogLog of one bucket.
//	bm2:{tttt}:v:<signature id>  hash: voter pseudonym → kind ('n'/'b') and unix
//	                             seconds; '#' → "notbulk,bulk,oldest". The votes
//	                             on a campaign have the id campaign:<ref, 8 hex>
//	                             and the campaign's tag, so that the script
//	                             counting the campaign reads them.
//	bm2:{uuuu}:u:<voter>         hash, per voter (tag from the voter's pseudonym):
//	                             signature id → kind and time. The index behind
//	                             "list/remove votes by voter".
//
// Counting keys expire with their bucket: a bucket's keys live until the
// end of the last window that includes it, plus min(bucket/8, 5 min) of
// grace for clock skew between hosts. Vote keys live VoteHorizon + 1h after
// their last vote; votes older than the horizon are dropped when the key is
// next read or written.
//
// On a single server one Observe is one EVALSHA: the script reads the
// pointers (the kc: strings of every key first, the lanes of the ko:
// strings only of the keys not found there), decides the campaign (the
// same integer arithmetic as model.go's decide), writes the pointers and
// counts the campaign, naming the campaign's keys itself, and those of the
// campaigns counted with it (a single server allows undeclared keys). On a
// cluster the keys of one message hash to many slots, so Observe takes two
// round trips: one pipeline reads the pointers and votes (one script call
// a primary, its keys of every slot it serves undeclared, on Redis 7.0 or
// later; else one a slot) and probes the new ref; Go decides (the pointers
// carry what "One sender's template" and spread lines ask: model.go); a
// second pipeline writes
// the pointers that change (one call a primary, or a slot) and counts the campaign,
// and the campaigns counted with it (a union, model.go), whose members it
// returns, in the same pipeline. A message dated a window or more before
// what the daemon wrote since in its slot of the ring of buckets (ahead.go's
// written) is counted and keeps nothing, as on the embedded store: one
// pipeline reads its votes and probes its ref, and nothing is written. Two copies with different keys arriving
// at the same moment on two daemons may then start two campaigns. Scripts
// are plain Lua, declare every key on a cluster but a primary's call's, whose
// refusal (a slot moved) sends it again one call a slot, and are re-sent with EVAL
// when a server answers NOSCRIPT (script cache flushed, restart, failover,
// new node): go-redis's Script.Run does not fall back inside a pipeline.
//
// Votes are users' data: on Redis they persist as far as the server's
// persistence does (appendonly yes, or RDB snapshots; without either a
// restart loses votes and counts). A shared database should also not use an
// eviction policy that can drop keys without a TTL (maxmemory-policy
// noeviction or volatile-*): the meta and vote keys must stay.
//
// # Failures
//
// Calls are bounded by the caller's context and RedisOptions.Timeout,
// whichever ends first (go-redis's ContextTimeoutEnabled). Errors that mean
// the store cannot answer now wrap ErrUnavailable: timeouts, refused or
// reset connections, LOADING, BUSY, CLUSTERDOWN, TRYAGAIN, MASTERDOWN,
// READONLY, OOM, a closed store. NewRedis succeeds while Redis is down and
// the store recovers by itself once it answers (go-redis redials; after
// PoolSize consecutive dial failures it probes once a second, so recovery
// can lag Redis's return by about a second). A call that timed out may
// still be applied by the server later; that is harmless because writes
// are idempotent.
//
// The embedded store keeps the same pointers and tiers in memory, sharded
// under 64 locks for pointers and 64 for campaigns (a message takes its
// keys' pointer locks in order, then one campaign lock at a time; a closed
// bucket's pointers are packed, about 9 bytes each, and so are the open
// bucket's as it fills once it is large: fstable.go),
// bounded by EmbeddedOptions.MaxEntries (oldest pointers and first
// sightings, then least recently written counters are evicted, and
// counted; the records of campaigns of two or more messages live as long
// as the window; votes are never evicted), and persists to a file written
// atomically (see persist.go for the format). A damaged file is moved
// aside and reported with a *CorruptFileError; the votes are written
// first and come back whenever their part of the file is intact.
//
// It imports nothing of bulkmilter: it reports through its own Observer.
package store
