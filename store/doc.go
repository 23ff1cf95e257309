// Package store keeps the volume counters and the feedback votes behind the
// bulk verdict: for each signature key, how many distinct recipients got a
// message with that key within a sliding time window, and which users voted
// a signature "bulk" or "not bulk".
//
// Two implementations share one contract, tested by one conformance suite
// (package storetest): Embedded, in process for a single host and the
// zero-configuration default, and Redis (one server, Sentinel or Cluster),
// shared by several MTAs. Keys handed to a store are opaque signature ids
// ("v1:imatch.3:00ab…"); the store owns their layout.
//
// # Counting
//
// Time is cut into buckets of Window/Buckets (default 24h/4 = 6h), aligned
// on the Unix epoch; a message falls in the bucket of Observation.Time. The
// volume of a key at time t is the number of distinct recipients seen with
// it in the bucket of t and the Buckets buckets before: every recipient seen
// less than Window ago is counted, none seen Window+Window/Buckets ago or
// earlier is (the effective window is between 24h and 30h by default). A
// recipient seen again moves to the newer bucket. Recipients are normalised
// (trimmed, lower-cased) and counted once per message and per key: the same
// newsletter twice to one person is 1, one message with 200 RCPT TO is 200.
//
// A key's count lives in one of three tiers, so that the many keys seen once
// cost little (in Redis about 9 bytes each; see docs/performance.md):
//
//  1. First sighting: one recipient so far. In Redis an 8-byte record (32
//     bits of the key's hash, 32 bits of the recipient's pseudonym) in a
//     string shared by many keys (one per hash tag, split and bucket); the
//     embedded store keeps full hashes.
//  2. Exact set: from the second distinct recipient up to ExactLimit
//     (default 100): a hash recipient → last bucket, plus per-bucket counts.
//     Exact: a threshold of 10 or 50 is decided on the true count. In
//     Redis the first recipient enters by its 32-bit fingerprint and is
//     matched to its full pseudonym when it shows up again.
//  3. HyperLogLog: past ExactLimit, one HyperLogLog per bucket; the count is
//     the union of the window's buckets (PFCOUNT over several keys; the
//     embedded store merges registers). 2¹⁴ registers, standard error
//     0.81%; Redis's estimator undercounts slightly in the low hundreds
//     (docs/performance.md has the measured profile: within ±3% at n ≥ 101).
//
// Hash collisions, all negligible next to the HyperLogLog error: two
// distinct recipients of one key share a 48-bit pseudonym with probability
// about n²/2⁴⁹ (n = 10⁵: 2·10⁻⁵); in Redis, a second recipient is taken
// for the first one when their 32-bit fingerprints match (2⁻³² per
// message, the count stays 1 for one more message), and a key matches
// another key's first sighting with probability about (records per
// string)/2³² per lookup (about 5·10⁻⁸; the two keys then count one
// recipient too many or too few). A retried call counts nothing twice:
// every write is idempotent (rewriting the same record or hash value,
// PFADD).
//
// # Votes
//
// A vote (user, kind, time) is stored on each key of the voted message; a
// later vote by the same user on a key replaces the earlier one, VoteNone
// retracts it. A vote counts for VoteHorizon (default 180 days) after it
// was cast. Observe returns, per key, the number of distinct users who
// voted not-bulk and bulk, and for each recipient of the message who voted
// on any of its keys, that user's most recent vote (Result.UserVotes) and
// her vote on each key (Result.OwnVotes), in the same round trip. Voters
// are identified
// by the same normalisation and pseudonym as recipients, so a user's login
// or address must be what the MTA sees as the recipient. Admin lists and
// removes votes by key, key prefix or voter.
//
// Stores never hold an address: recipients and voters are 48-bit SipHash
// pseudonyms keyed by Params.Secret. Without a secret a built-in key is
// used and someone reading the store can still test a guessed address.
// Changing the secret orphans every stored vote (the pseudonyms change);
// Redis refuses to start against a database used with another secret.
//
// # Redis key schema, version 1
//
// Every key starts with the optional Namespace and "bm1:". The hash tag is
// {tttt}, 4 hex digits: the top 14 bits of xxHash64(signature id). All keys
// of one signature share it, so one Lua call touches one cluster slot; the
// 16384 tags spread signatures over every slot (never one global tag).
// The first-sighting hashes pack many signatures per key, which is why the
// tag is per group of signatures rather than per signature.
//
//	bm1:meta                     hash: schema, bucket_ms, buckets, key_id (secret
//	                             fingerprint), fs_split. Written by the first
//	                             daemon; later daemons must match (fs_split is
//	                             adopted). No TTL.
//	bm1:{tttt}:f:<s>:<bucket>    string: first sightings of bucket <bucket>
//	                             (epoch ms / bucket length) and split <s>
//	                             (bits 32+ of the hash mod fs_split): 8-byte
//	                             records, 4 bytes of the key's hash (low 32
//	                             bits) and 4 of the recipient's pseudonym. At
//	                             most FirstSightCap records (past it a key gets
//	                             an exact set at once).
//	bm1:{tttt}:x:<hash>          hash, per signature (<hash>: xxHash64 in hex):
//	                             exact set, 6-byte pseudonym (or '~' and a
//	                             4-byte fingerprint) → last bucket, and '#' →
//	                             "bucket:count …"; or, in the HyperLogLog tier,
//	                             only 'h' → "1".
//	bm1:{tttt}:c:<hash>:<bucket> HyperLogLog of one bucket.
//	bm1:{tttt}:v:<signature id>  hash: voter pseudonym → kind ('n'/'b') and unix
//	                             seconds; '#' → "notbulk,bulk,oldest".
//	bm1:{uuuu}:u:<voter>         hash, per voter (tag from the voter's pseudonym):
//	                             signature id → kind and time. The index behind
//	                             "list/remove votes by voter".
//
// Counting keys expire with their bucket: a bucket's keys live until the
// end of the last window that includes it, plus min(bucket/8, 5 min) of
// grace for clock skew between hosts. Vote keys live VoteHorizon + 1h after
// their last vote; votes older than the horizon are dropped when the key is
// next read or written.
//
// One Observe is one EVALSHA per cluster slot it touches, sent as one
// pipeline: one round trip on a single server (all keys in one script
// call), one per node in parallel on a cluster. The script is plain Lua,
// declares every key, and is re-sent with EVAL when a server answers
// NOSCRIPT (script cache flushed, restart, failover, new node): go-redis's
// Script.Run does not fall back inside a pipeline.
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
// The embedded store keeps the same tiers in memory, sharded by key under
// 64 locks, bounded by EmbeddedOptions.MaxEntries (oldest first sightings,
// then least recently written counters are evicted, and counted; votes are
// never evicted), and persists to a file written atomically (see
// persist.go for the format). A damaged file is moved aside and reported
// with a *CorruptFileError; the votes are written first and come back
// whenever their part of the file is intact.
package store
