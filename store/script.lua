-- bulkmilter store script, key schema bm2 (see store/doc.go).
--
-- On a cluster every key a call touches is declared in KEYS and shares one
-- hash tag, so the script runs in one slot (modes 'v', 'r', 'q', 'w', 'k'),
-- or a call of mode 'r' or 'w' reaches the keys of every slot of one
-- primary, named in ARGV ('X', below).
-- On a single server mode 'c' does a whole observation in one call: it
-- reads the keys' pointers, decides the campaign (model.go's decide, to the
-- same integer arithmetic), and names the campaign's keys itself, which a
-- single server allows. All writes are idempotent (rewriting the same
-- record, HSET, PFADD, recomputed tallies): running a call twice, as a
-- client retry after a timeout may do, leaves the same state and returns
-- the same counts.
--
-- ARGV[1] is the mode: 'c' observe on one server; on a cluster 'r' read
-- pointers and votes, 'q' find a free campaign ref, 'w' write pointers,
-- 'k' count a campaign; 'v' vote.

local CHUNK = 1000 -- arguments per command, below Lua's stack limit

-- A Cluster primary's call ('X', store/redis.go's xslot) carries the keys
-- of several slots that primary serves, for a call of mode 'r' or 'w':
-- ARGV 'X', n, runs, n key names, then the call's own ARGV. The keys are
-- not declared: a node refuses declared keys of two slots (CROSSSLOT),
-- but lets a script without a shebang reach undeclared keys of any slot
-- it serves (Redis 7.0's script.c gives it SCRIPT_ALLOW_CROSS_SLOT, as
-- the allow-cross-slot-keys flag does a script with one); a key of a slot
-- it does not serve, or one being migrated away that it no longer holds,
-- fails the call, which the store then sends again one call a slot.
-- runs: the lengths of the runs of signatures of one slot, in order
-- (RUN[s]: signature s's run), so that each multi-key command (MGET,
-- EXISTS) takes one slot's keys.
local KEYS, ARGV, RUN = KEYS, ARGV, nil
if ARGV[1] == 'X' then
  local n, k, a = tonumber(ARGV[2]), {}, {}
  for i = 1, n do k[i] = ARGV[3 + i] end
  for i = 4 + n, #ARGV do a[i - 3 - n] = ARGV[i] end
  RUN = {}
  local s, r = 0, 0
  for len in string.gmatch(ARGV[3], '%d+') do
    r = r + 1
    for _ = 1, tonumber(len) do
      s = s + 1
      RUN[s] = r
    end
  end
  KEYS, ARGV = k, a
end

-- mget reads list's strings in one MGET, or, on a primary's call, one a
-- run of one slot: list[i] is a key of signature sig(i).
local function mget(list, sig)
  if not RUN then return redis.call('MGET', unpack(list)) end
  local out, i = {}, 1
  while i <= #list do
    local j, r = i, RUN[sig(i)]
    while j < #list and RUN[sig(j + 1)] == r do j = j + 1 end
    local got = redis.call('MGET', unpack(list, i, j))
    for x = i, j do out[x] = got[x - i + 1] end
    i = j + 1
  end
  return out
end

-- mget_range reads KEYS[off + 1 .. off + n], a key a signature: mget
-- without a list on one server.
local function mget_range(off, n)
  if not RUN then return redis.call('MGET', unpack(KEYS, off + 1, off + n)) end
  local list = {}
  for s = 1, n do list[s] = KEYS[off + s] end
  return mget(list, function(i) return i end)
end

-- exists_range is EXISTS over KEYS[off + 1 .. off + n], a key a
-- signature, one command a run on a primary's call.
local function exists_range(off, n)
  if not RUN then return redis.call('EXISTS', unpack(KEYS, off + 1, off + n)) end
  local total, a = 0, 1
  for s = 1, n do
    if s == n or RUN[s + 1] ~= RUN[s] then
      total = total + redis.call('EXISTS', unpack(KEYS, off + a, off + s))
      a = s + 1
    end
  end
  return total
end

-- itoa formats an integer for a command or a key name: a Lua number
-- handed to redis.call is formatted with "%.17g" and one concatenated
-- with "%.14g", each a multi-precision printf_fp in glibc (~4 % of
-- redis-server's instructions an observation); "%d" is not.
local function itoa(n) return string.format('%d', n) end

local function chunks(cmd, key, list, from, to)
  local out = {}
  for i = from, to, CHUNK do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + CHUNK - 1, to)))
    if type(r) == 'table' then
      for j = 1, #r do out[#out + 1] = r[j] end
    end
  end
  return out
end

-- Votes ------------------------------------------------------------------
-- A vote hash maps a 6-byte voter pseudonym to kind..unixseconds ('n' not
-- bulk, 'b' bulk); the field '#' holds "notbulk,bulk,oldest" so a count
-- needs one HGET.

local function tally_parse(s)
  local n, b, o = string.match(s or '', '^(%d+),(%d+),(%-?%d+)$')
  return tonumber(n) or 0, tonumber(b) or 0, tonumber(o) or 0
end

-- vote_rebuild drops votes cast at or before now-hz (and the voter 'drop')
-- and recounts what is left.
local function vote_rebuild(k, now, hz, drop)
  local all = redis.call('HGETALL', k)
  local n, b, oldest = 0, 0, nil
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if #f == 6 then
      local t = tonumber(string.sub(v, 2)) or 0
      if f == drop or t <= now - hz then
        redis.call('HDEL', k, f)
      else
        if string.sub(v, 1, 1) == 'n' then n = n + 1 else b = b + 1 end
        if oldest == nil or t < oldest then oldest = t end
      end
    end
  end
  return n, b, oldest
end

local function vote_store(k, n, b, oldest, ttlms)
  if n + b == 0 then
    redis.call('DEL', k)
    return
  end
  redis.call('HSET', k, '#', itoa(n) .. ',' .. itoa(b) .. ',' .. itoa(oldest))
  if ttlms then redis.call('PEXPIRE', k, itoa(ttlms)) end
end

if ARGV[1] == 'v' then
  -- KEYS[1] vote hash. ARGV: 'v', voter, kind ('n', 'b' or '-' to
  -- retract), now (unix s), horizon (s), ttl (ms). Returns the voter's
  -- previous value or ''.
  local k, voter, kind = KEYS[1], ARGV[2], ARGV[3]
  local now, hz, ttlms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local old = redis.call('HGET', k, voter)
  local n, b, oldest = vote_rebuild(k, now, hz, voter)
  if kind == '-' then
    vote_store(k, n, b, oldest or now, nil)
  else
    redis.call('HSET', k, voter, kind .. ARGV[4])
    if kind == 'n' then n = n + 1 else b = b + 1 end
    if oldest == nil or now < oldest then oldest = now end
    vote_store(k, n, b, oldest, ttlms)
  end
  return old or ''
end

-- Observe ------------------------------------------------------------------

local mode = ARGV[1]
local REC = 9       -- pointer record: 4 bytes of the key's hash, 4 of the pointer, 1 of its class
local CREC = 20     -- campaign first sighting: ref, recipient, first (unix s), network, sender, origin
local UNIT, JOINEV, SHARE, WEAKSHARE, WEAKCAP = 1000000, 1, 0, 10, 4
local USHARE, UKEYS, UMAX = 1, 2, 3
local SWHOLE = 720720
local REFMASK = 536870911 -- 2^29 - 1

local fscache = {}

local function fs_get(k)
  local s = fscache[k]
  if s == nil then
    s = redis.call('GET', k) or ''
    fscache[k] = s
  end
  return s
end

-- fs_mget reads, in one MGET, the strings of list not read yet; list[i]
-- is a key of signature i on a primary's call (mget).
local function fs_mget(list)
  local missing, sigs = {}, {}
  for i, k in ipairs(list) do
    if fscache[k] == nil then
      missing[#missing + 1] = k
      sigs[#missing] = i
    end
  end
  if #missing == 0 then return end
  local vals = mget(missing, function(i) return sigs[i] end)
  for i, k in ipairs(missing) do fscache[k] = vals[i] or '' end
end

-- fs_find finds field at a record boundary of a whole record: a damaged
-- string (cut short, or not of whole records) never yields a partial one.
local function fs_find(s, field, rec)
  local init = 1
  while true do
    local p = string.find(s, field, init, true)
    if not p or p + rec - 1 > #s then return nil end
    if (p - 1) % rec == 0 then return p end
    init = p + 1
  end
end

-- fs_put appends a record if the string has room; a new string gets its
-- TTL. SET of the whole string, not APPEND: APPEND leaves up to as much
-- spare room as the string holds.
local function fs_put(k, rec, cap, rlen, ttlms)
  local s = fs_get(k)
  if #s >= cap * rlen then return false end
  local ns = s .. rec
  if s == '' then
    redis.call('SET', k, ns, 'PX', itoa(ttlms))
  else
    redis.call('SET', k, ns, 'KEEPTTL')
  end
  fscache[k] = ns
  return true
end

local function fs_del(k, field, rec)
  local s = fs_get(k)
  local p = fs_find(s, field, rec)
  if not p then return end
  local ns = string.sub(s, 1, p - 1) .. string.sub(s, p + rec)
  if ns == '' then redis.call('DEL', k) else redis.call('SET', k, ns, 'KEEPTTL') end
  fscache[k] = ns
end

local function u32(v)
  return string.char(math.floor(v / 16777216) % 256, math.floor(v / 65536) % 256, math.floor(v / 256) % 256, v % 256)
end
local function u16(v) return string.char(math.floor(v / 256) % 256, v % 256) end
local function num(s, i, n)
  local v = 0
  for j = i, i + n - 1 do v = v * 256 + string.byte(s, j) end
  return v
end

-- A campaign's networks and senders: packed 2-byte fingerprints, at most
-- SETCAP; 0 is unknown and not kept.
local SETCAP = 16
local function fpset_add(set, fp)
  if fp == 0 or #set >= 2 * SETCAP then return set end
  local f = u16(fp)
  for i = 1, #set - 1, 2 do
    if string.sub(set, i, i + 1) == f then return set end
  end
  return set .. f
end

-- Counting a campaign's recipients: the tiers of store/doc.go. The exact
-- set maps a recipient pseudonym (6 bytes) to the last bucket it was seen
-- in, '#' holds "bucket:count ...", and 't', 'n', 's' the campaign's first
-- time, networks and senders. A first recipient known only by its
-- fingerprint enters as '~'..fingerprint.
local function member(f) return #f == 6 or #f == 5 end

local function counts_parse(s)
  local t = {}
  if s then
    for bk, c in string.gmatch(s, '(%-?%d+):(%d+)') do t[tonumber(bk)] = tonumber(c) end
  end
  return t
end

local function counts_format(t)
  local bks = {}
  for bk, c in pairs(t) do if c > 0 then bks[#bks + 1] = bk end end
  table.sort(bks)
  local parts = {}
  for i, bk in ipairs(bks) do parts[i] = itoa(bk) .. ':' .. itoa(t[bk]) end
  return table.concat(parts, ' ')
end

-- camp_count counts campaign ck (its keys and window) with recipients rs,
-- writing when write; it returns count, networks, senders, first, or nil
-- when the campaign is unknown and nothing was written.
-- camp_stale tells whether a campaign record m (camp_count's HMGET:
-- '#', 'h', …) holds an exact set none of whose buckets is in the window
-- from oldest. The embedded store drops such a campaign (its last bucket
-- left the window); a Redis hash lives until its real-time TTL, which a
-- replay outruns (and a ref taken again within the TTL's grace), and its
-- networks, senders and first time were carried into the ref's next
-- campaign. The HyperLogLog tier is left to its TTL.
local function camp_stale(m, oldest)
  if not oldest or not m[1] or m[2] then return false end
  for bk in pairs(counts_parse(m[1])) do
    if bk >= oldest then return false end
  end
  return true
end

local function camp_count(ck, rs, write, net, snd)
  local nb, cb, oldest = ck.nb, ck.cb, ck.cb - ck.nb + 1
  local function ttlof(bk) return ck.ttl - (cb - bk) * ck.blen end
  local x = ck.x
  local function hll_keys()
    local out = {}
    for i = 1, nb do out[i] = ck.c[i] end
    return out
  end
  -- exact_add records entries {member, bucket}; nil after turning the set
  -- into per-bucket HyperLogLogs.
  local function exact_add(entries, hash)
    local t = counts_parse(hash)
    local stale = false
    for bk in pairs(t) do if bk < oldest then stale = true end end
    if stale then
      local all = redis.call('HGETALL', x)
      for i = 1, #all, 2 do
        if member(all[i]) and tonumber(all[i + 1]) < oldest then redis.call('HDEL', x, all[i]) end
      end
      for bk in pairs(t) do if bk < oldest then t[bk] = nil end end
    end
    for _, e in ipairs(entries) do
      local r, bk = e[1], e[2]
      local old, pv, ph
      if #r == 6 then
        ph = '~' .. string.sub(r, 3, 6)
        local v = redis.call('HMGET', x, r, ph)
        old, pv = tonumber(v[1] or ''), tonumber(v[2] or '')
      else
        old = tonumber(redis.call('HGET', x, r) or '')
      end
      if old == nil and pv ~= nil then
        redis.call('HDEL', x, ph)
        redis.call('HSET', x, r, itoa(pv))
        old = pv
      end
      if old == nil then
        redis.call('HSET', x, r, itoa(bk))
        t[bk] = (t[bk] or 0) + 1
      elseif old < bk then
        redis.call('HSET', x, r, itoa(bk))
        t[old] = (t[old] or 1) - 1
        t[bk] = (t[bk] or 0) + 1
      end
    end
    local live = 0
    for _, c in pairs(t) do live = live + c end
    if live > ck.elim then
      local all = redis.call('HGETALL', x)
      local per = {}
      for i = 1, #all, 2 do
        if member(all[i]) then
          local bk = math.min(tonumber(all[i + 1]), cb)
          if bk >= oldest then
            per[bk] = per[bk] or {}
            table.insert(per[bk], all[i])
          end
        end
      end
      redis.call('HDEL', x, '#')
      for i = 1, #all, 2 do
        if member(all[i]) then redis.call('HDEL', x, all[i]) end
      end
      for bk, list in pairs(per) do
        local hk = ck.c[bk - oldest + 1]
        chunks('PFADD', hk, list, 1, #list)
        redis.call('PEXPIRE', hk, itoa(ttlof(bk)))
      end
      return nil
    end
    redis.call('HSET', x, '#', counts_format(t))
    return live
  end

  local m = ck.m or redis.call('HMGET', x, '#', 'h', 't', 'n', 's', 'o', 'p')
  ck.m = nil
  if camp_stale(m, oldest) then
    -- counted afresh (a read only reads it so); the stored merge's fields
    -- keep their own buckets
    if write then
      for _, f in ipairs(redis.call('HKEYS', x)) do
        if f ~= 'a' and f ~= 'p' then redis.call('HDEL', x, f) end
      end
    end
    m = {false, false, false, false, false, false, m[7]}
  end
  ck.parts = m[7] or ''
  local hll = m[2] ~= false
  local first, nets, snds
  local count
  local nr = #rs
  if hll or m[1] then
    first, nets, snds = tonumber(m[3]) or ck.now, m[4] or '', m[5] or ''
    if write and nr > 0 and not hll then
      local entries = {}
      for j = 1, nr do entries[j] = {rs[j], cb} end
      count = exact_add(entries, m[1])
      if count == nil then hll = true end
    elseif not hll then
      count = 0
      for bk, c in pairs(counts_parse(m[1])) do
        if bk >= oldest then count = count + c end
      end
    end
  else
    fs_mget(ck.f)
    local rec, fbk
    for i = nb, 1, -1 do
      local str = fs_get(ck.f[i])
      local p = fs_find(str, ck.field, CREC)
      if p then
        rec = string.sub(str, p, p + CREC - 1)
        fbk = oldest + i - 1
        break
      end
    end
    if rec == nil and not write then return nil end
    if rec == nil and nr == 1 then
      local r = ck.field .. string.sub(rs[1], 3, 6) .. u32(ck.now) .. u16(net) .. u16(snd) .. ck.origin
      -- an old message (ck.old) is counted and keeps nothing
      if ck.old or fs_put(ck.f[nb], r, ck.cap, CREC, ck.ttl) then
        return 1, (net > 0) and 1 or 0, (snd > 0) and 1 or 0, ck.now
      end
    end
    if rec ~= nil and not write then
      return 1, (num(rec, 13, 2) > 0) and 1 or 0, (num(rec, 15, 2) > 0) and 1 or 0, num(rec, 9, 4)
    end
    -- A second message, or a first one to several recipients: the
    -- campaign gets its exact set (or HyperLogLogs at once).
    local entries = {}
    first, nets, snds = ck.now, '', ''
    local origin = ck.origin
    if rec then
      origin = string.sub(rec, 17, 20)
      for i = 1, nb do fs_del(ck.f[i], ck.field, CREC) end
      entries[1] = {'~' .. string.sub(rec, 5, 8), fbk}
      first = math.min(first, num(rec, 9, 4))
      nets = fpset_add(nets, num(rec, 13, 2))
      snds = fpset_add(snds, num(rec, 15, 2))
    end
    for j = 1, nr do entries[#entries + 1] = {rs[j], cb} end
    redis.call('HSET', x, 'o', origin)
    if #entries <= ck.elim then
      count = exact_add(entries, nil)
      if count == nil then hll = true end
    else
      if rec then
        local hk = ck.c[fbk - oldest + 1]
        redis.call('PFADD', hk, entries[1][1])
        redis.call('PEXPIRE', hk, itoa(ttlof(fbk)))
      end
      hll = true
    end
  end
  if write then
    first = math.min(first, ck.now)
    nets = fpset_add(nets, net)
    snds = fpset_add(snds, snd)
    redis.call('HSET', x, 't', itoa(first), 'n', nets, 's', snds)
  end
  if hll then
    if write and nr > 0 then
      chunks('PFADD', ck.c[nb], rs, 1, nr)
      redis.call('PEXPIRE', ck.c[nb], itoa(ck.ttl))
      redis.call('HSET', x, 'h', '1')
    end
    count = redis.call('PFCOUNT', unpack(hll_keys()))
  end
  if write then
    -- The record lives as long as the newest bucket it counts.
    redis.call('PEXPIRE', x, itoa(ck.ttl))
  end
  return count, #nets / 2, #snds / 2, first
end

-- camp_members returns the 4-byte fingerprints of campaign ck's
-- recipients live in the window, or, when it counts them by HyperLogLog,
-- their count (else -1): the union rule (model.go's union).
local function camp_members(ck)
  local oldest = ck.cb - ck.nb + 1
  local fps = {}
  if redis.call('HEXISTS', ck.x, 'h') == 1 then
    local ks = {}
    for i = 1, ck.nb do ks[i] = ck.c[i] end
    return fps, redis.call('PFCOUNT', unpack(ks))
  end
  local all = redis.call('HGETALL', ck.x)
  if #all > 0 then
    for i = 1, #all, 2 do
      if member(all[i]) and tonumber(all[i + 1]) >= oldest then fps[#fps + 1] = string.sub(all[i], -4) end
    end
    return fps, -1
  end
  fs_mget(ck.f)
  for i = ck.nb, 1, -1 do
    local str = fs_get(ck.f[i])
    local p = fs_find(str, ck.field, CREC)
    if p then return {string.sub(str, p + 4, p + 7)}, -1 end
  end
  return fps, -1
end

-- camp_live tells whether a campaign of another origin holds ck's ref in
-- the window, or a live alias names it (from oldest; nil: not asked).
local function camp_live(ck, origin, oldest)
  -- the exact set's fields camp_count reads too, in the same command
  local m = redis.call('HMGET', ck.x, '#', 'h', 't', 'n', 's', 'o', 'p', 'a')
  ck.m = m
  local o = m[6]
  -- a ref a live alias names is never taken (model.go's stored merge)
  local a = m[8]
  if oldest and a and #a == 8 and num(a, 5, 4) >= oldest then return true end
  if o and not camp_stale(m, oldest) then return o ~= origin end
  fs_mget(ck.f)
  for i = 1, ck.nb do
    local s = fs_get(ck.f[i])
    local p = fs_find(s, ck.field, CREC)
    if p then return string.sub(s, p + 16, p + 19) ~= origin end
  end
  return false
end

-- Votes of one key on an observation: the tally and the recipients' own.
local function key_votes(vk, rs, now, hz)
  local n, b, uv = 0, 0, {}
  local tally = redis.call('HGET', vk, '#')
  if tally then
    local o
    n, b, o = tally_parse(tally)
    if o <= now - hz then
      local oo
      n, b, oo = vote_rebuild(vk, now, hz, nil)
      vote_store(vk, n, b, oo or now, nil)
    end
    local nr = #rs
    if nr > 0 and n + b > 0 then
      for i = 1, nr, CHUNK do
        local last = math.min(i + CHUNK - 1, nr)
        local vs = redis.call('HMGET', vk, unpack(rs, i, last))
        for j = 1, #vs do
          if vs[j] then
            uv[#uv + 1] = i + j - 1
            uv[#uv + 1] = vs[j]
          end
        end
      end
    end
  end
  return {n, b, uv}
end

-- Pointers (store/doc.go): KEYS per key are its current pointer string,
-- its older pointer string and its vote hash. The current string holds
-- 9-byte records (4 of the key's hash, the top bit set for a support
-- family's key but the line family's, 4 of the pointer, 1 of the class
-- of the campaign's only sender, or a line key's writer's sender's,
-- model.go; 0 for a support family's) in the order written: a
-- record of the current bucket is rewritten in place, which needs the
-- whole check. The older string holds the window's earlier buckets
-- in lanes (below), the support records there in 6 bytes (2 bytes of the
-- check; a false match there only names a campaign no other family
-- names, which a support key alone never joins). Two strings a key to
-- read, not one a bucket: when a key's string of a new bucket is first
-- written, its current records move to the older string.
local SREC = 6 -- an older support record: 2 bytes of the check, 4 of the pointer

-- A pointer's value in the script: the 32-bit pointer (ref * 8 + switch
-- count) and, above it, its class (model.go's ptr): cls * 2^32 + pointer.
local P32 = 4294967296
local function pref(v) return math.floor(v % P32 / 8) end
local function pcls(v) return math.floor(v / P32) end

local function u32at(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- rec_find finds field at a record boundary (records of rec bytes from
-- byte from) of the whole records in s up to byte to: a damaged string
-- never yields a partial record.
local function rec_find(s, field, from, to, rec)
  local init = from
  while true do
    local p = string.find(s, field, init, true)
    if not p or p + rec - 1 > to then return nil end
    if (p - from) % rec == 0 then return p end
    init = p + 1
  end
end

-- The current string (store/doc.go): the bucket (4 bytes), the lengths
-- of the older string's 2 * LANES lanes (2 bytes each, so that a key
-- reads only its lane of it), then the records in the order written, at
-- most QCAP: past it they move to the older string's section of the
-- bucket (old_put), so that the string read by every new key stays
-- small whatever the traffic. A new record is appended (APPEND), not
-- the string rebuilt and rewritten: that was half of a new key's cost
-- in the script. A support family's key has the top bit of its check
-- set (the client sets it), so that a move tells its records apart.
local LANES, QCAP = 4, 48
local HDR = 4 + 4 * LANES
local NOLANES = string.rep('\0', 4 * LANES) -- the lengths of no older string

-- cur_ok tells whether current string s holds a header and whole
-- records (a damaged one is replaced by the next write).
local function cur_ok(s)
  return #s >= HDR and (#s - HDR) % REC == 0
end

-- cur_read looks for field in current string s; it returns the pointer
-- and the bucket, or nil and whether s is of bucket cb (without field).
-- hidden: the buckets of the message's window whose pointers this
-- daemon's ring of buckets no longer holds (store/ahead.go's written),
-- which a read takes as empty, as the embedded store does.
local hidden = {}

local function cur_read(s, field, cb, oldest)
  if not cur_ok(s) then return nil, nil, false end
  local bk = u32at(s, 1)
  if bk > cb or bk < oldest or hidden[bk] then return nil, nil, false end
  local p = rec_find(s, field, HDR + 1, #s, REC)
  if p then return u32at(s, p + 4) + string.byte(s, p + 8) * P32, bk end
  return nil, nil, bk == cb
end

-- The older string (store/doc.go): 2 * LANES lanes, the main part's
-- LANES then the support part's; a key's lane is the last byte of its
-- check mod LANES. A lane is the window's buckets newest first, from
-- the bucket of the current string (its anchor), up to its oldest
-- bucket with records: a count byte a bucket (at most 255 records),
-- then the records' checks, then their pointers (below: lane_sizes).
-- The lanes' lengths are in the current string's header. A key reads
-- only its lane's counts and checks (GETRANGE, where the current
-- string's header says it lies): at a million messages a day the
-- string holds ~14 KB, and the bytes copied into Lua were the largest
-- cost of a lookup.
local function u16at(s, i)
  local a, b = string.byte(s, i, i + 1)
  return a * 256 + b
end

-- lane returns the 0-based lane of a key's check (sup: a support
-- family's): its part's lanes, then its place among them.
local function lane(field, sup)
  local l = string.byte(field, 4) % LANES
  if sup then return LANES + l end
  return l
end

-- A lane is its buckets' count bytes, then their records' checks (main
-- 4 bytes, support 2), then their pointers (main 5 bytes: the pointer
-- and the class; support 4), each part in the buckets' order: a key
-- reads the counts and the checks alone (GETRANGE), and a pointer only
-- when its check is there. Every byte a command hands the script costs
-- ~14 instructions in the Lua string made of it, and the pointers were
-- over half of a lane's bytes.
local function lane_sizes(sup)
  if sup then return 2, 4 end
  return 4, 5
end

-- lane_shape returns the count bytes and the records of a lane of len
-- bytes (records of rec bytes, at most nb buckets), or nil when its
-- length fits no lane or more than one shape (nb >= rec).
local function lane_shape(len, rec, nb)
  if len == 0 then return 0, 0 end
  local b
  for r = 1, math.min(nb, len) do
    if (len - r) % rec == 0 then
      if b then return nil end
      b = r
    end
  end
  if not b then return nil end
  return b, (len - b) / rec
end

-- lane_counts returns the count bytes and the records of the lane of s
-- from byte from to byte to (records of rec bytes), or nil when its
-- counts do not tile it exactly.
local function lane_counts(s, from, to, rec, nb)
  local len, tot = to - from + 1, 0
  if len == 0 then return 0, 0 end
  for i = 1, math.min(nb, len) do
    tot = tot + string.byte(s, from + i - 1)
    if i + tot * rec == len then return i, tot end
    if i + tot * rec > len then return nil end
  end
  return nil
end

-- lane_find looks for field's check among the n checks (cl bytes each)
-- of the lane of s from byte from (b count bytes), anchored at bucket
-- anchor; it returns the record's 0-based place and its bucket, or nil.
local function lane_find(s, from, b, n, cl, field, anchor, cb, oldest)
  local chk = field
  if cl == 2 then chk = string.sub(field, 3, 4) end
  local a = from + b
  local z = a + n * cl - 1
  local init = a
  while true do
    local p = string.find(s, chk, init, true)
    if not p or p + cl - 1 > z then return nil end
    if (p - a) % cl == 0 then
      local j, tot = (p - a) / cl, 0
      for i = 0, b - 1 do
        tot = tot + string.byte(s, from + i)
        if j < tot then
          local bk = anchor - i
          if bk <= cb and bk >= oldest and not hidden[bk] then return j, bk end
          break
        end
      end
    end
    init = p + 1
  end
end

-- lane_ptr decodes the pointer at byte p of s (pl bytes: 5 with a class).
local function lane_ptr(s, p, pl)
  if pl == 4 then return u32at(s, p) end
  return u32at(s, p) + string.byte(s, p + 4) * P32
end

-- old_lanes returns each lane's first and last byte in older string
-- s, from the lanes' lengths lens (a current string's header), or nil
-- when s is not as long as they say.
local function old_lanes(s, lens)
  local out, pos = {}, 1
  for l = 0, 2 * LANES - 1 do
    local n = u16at(lens, 2 * l + 1)
    out[l] = {pos, pos + n - 1}
    pos = pos + n
  end
  if pos ~= #s + 1 then return nil end
  return out
end

-- OLDWHOLE: an older string of at most this many bytes is read whole,
-- in the one MGET of such strings (a near-empty database: one command,
-- not one a key).
local OLDWHOLE = 512

-- cur_split returns current string s's main records and its support
-- records in the older string's 6 bytes (the class, 0, dropped), each in
-- the order written.
local function cur_split(s)
  local m, u = {}, {}
  for p = HDR + 1, #s - REC + 1, REC do
    if string.byte(s, p) < 128 then
      m[#m + 1] = string.sub(s, p, p + REC - 1)
    else
      u[#u + 1] = string.sub(s, p + 2, p + 7)
    end
  end
  return table.concat(m), table.concat(u)
end

-- old_secs returns the records of older string s (lanes' lengths lens)
-- by bucket (anchored at anchor) and lane, {bucket, {lane -> {checks,
-- pointers}}} (none when s is not whole lanes).
local function old_secs(s, lens, anchor, nb)
  local secs = {}
  local lanes = #lens == 4 * LANES and old_lanes(s, lens)
  if not lanes then return secs end
  for l = 0, 2 * LANES - 1 do
    local cl, pl = lane_sizes(l >= LANES)
    local from = lanes[l][1]
    local b, n = lane_counts(s, from, lanes[l][2], cl + pl, nb)
    if not b then return {} end
    local c0, p0 = from + b, from + b + n * cl
    for i = 0, b - 1 do
      local k = string.byte(s, from + i)
      if k > 0 then
        local bk = anchor - i
        local sec = secs[bk] or {bk, {}}
        secs[bk] = sec
        sec[2][l] = {string.sub(s, c0, c0 + k * cl - 1), string.sub(s, p0, p0 + k * pl - 1)}
      end
      c0, p0 = c0 + k * cl, p0 + k * pl
    end
  end
  return secs
end

-- old_put adds main records mrecs and support records srecs (6 bytes) to
-- bucket bk's section of older string k, anchored at bucket from and
-- rewritten anchored at bucket to (chk: they are one record of that
-- check, replaced in place if there; nil: a bucket's records from a
-- current string, newer than the section's, kept as far as the section
-- has room: cap records a bucket, 255 a lane), keeps the nb buckets
-- from to back (the others left the window), and gives the string the
-- life of its newest section. lens are the lanes' lengths now (the
-- current string's header); it returns the new ones.
local function old_put(k, lens, bk, mrecs, srecs, chk, from, to, cb, oldest, cap, ttl, blen)
  local nb = cb - oldest + 1
  local secs = old_secs(fs_get(k), lens, from, nb)
  local sec = secs[bk]
  if not sec then
    sec = {bk, {}}
    secs[bk] = sec
  end
  local ls = sec[2]
  local have = 0
  for l = 0, 2 * LANES - 1 do
    if ls[l] then have = have + #ls[l][1] / (l < LANES and 4 or 2) end
  end
  -- the records moved from a current string, a list a lane in the order
  -- written (emitted newest first): one string made of them all below,
  -- not one a record (every string made costs its every byte again)
  local new = {}
  local function add(recs, rec, sup)
    local cl = lane_sizes(sup) -- the check's length
    for p = 1, #recs - rec + 1, rec do
      local c, v = string.sub(recs, p, p + cl - 1), string.sub(recs, p + cl, p + rec - 1)
      local l = string.byte(c, cl) % LANES + (sup and LANES or 0)
      local body = ls[l] or {'', ''}
      local cs, ps = body[1], body[2]
      local nw = new[l] or {}
      if chk then
        local q = rec_find(cs, c, 1, #cs, cl)
        if q then
          local o = (q - 1) / cl * #v
          ps = string.sub(ps, 1, o) .. v .. string.sub(ps, o + #v + 1)
        elseif have < cap and #cs < 255 * cl then
          cs, ps = cs .. c, ps .. v
        end
      elseif have < cap and #cs + #nw * cl / 2 < 255 * cl then
        nw[#nw + 1], nw[#nw + 2] = c, v
        new[l] = nw
        have = have + 1
      end
      ls[l] = {cs, ps}
    end
  end
  add(mrecs, REC, false)
  add(srecs, SREC, true)
  local out, nlens, newest = {}, {}, nil
  for l = 0, 2 * LANES - 1 do
    local cl = l < LANES and 4 or 2
    local nw = new[l] or {}
    -- up to the lane's oldest bucket with records
    local last, n = -1, 0
    for i = 0, nb - 1 do
      local sc = secs[to - i]
      if sc and sc[2][l] and (sc[2][l][1] ~= '' or (to - i == bk and #nw > 0)) then last = i end
    end
    local cnt = {}
    for i = 0, last do
      local b = to - i
      local sc = secs[b]
      local r = sc and sc[2][l] or {'', ''}
      local k = #r[1] / cl + (b == bk and #nw / 2 or 0)
      if k > 0 and (newest == nil or b > newest) then newest = b end
      cnt[i + 1] = string.char(k)
      n = n + 1 + #r[1] + #r[2] + (b == bk and #nw / 2 * (cl + (l < LANES and 5 or 4)) or 0)
    end
    out[#out + 1] = table.concat(cnt)
    for part = 1, 2 do
      for i = 0, last do
        local b = to - i
        local sc = secs[b]
        if b == bk then
          for j = #nw - 2 + part, 1, -2 do out[#out + 1] = nw[j] end
        end
        if sc and sc[2][l] then out[#out + 1] = sc[2][l][part] end
      end
    end
    nlens[l + 1] = u16(n)
  end
  if newest == nil then
    fscache[k] = ''
    redis.call('DEL', k)
    return NOLANES
  end
  local ns = table.concat(out)
  fscache[k] = ns
  redis.call('SET', k, ns, 'PX', itoa(ttl - (cb - newest) * blen))
  return table.concat(nlens)
end

-- ptr_write records field -> pointer in current string pck (in place
-- when the key is there already, else appended; sup: a support family's
-- key); the first write of a new bucket moves the current records to
-- older string pok. without: the string as read when cur_read found it
-- of bucket cb without the key (or nil); while it is unchanged the
-- record is appended without looking again.
local u32c = {} -- u32 of the pointers written: most keys of a message take the same

local function ptr_write(pck, pok, field, sup, v, cb, oldest, cap, ttl, blen, ahead, without)
  local e = u32c[v]
  if not e then
    e = u32(v % P32) .. string.char(pcls(v))
    u32c[v] = e
  end
  local rec = field .. e
  local s = fs_get(pck)
  if s == without and #s - HDR < QCAP * REC then
    redis.call('APPEND', pck, rec)
    fscache[pck] = nil
    return
  end
  local ok = cur_ok(s)
  local bk = ok and u32at(s, 1) or -1
  if bk == cb then
    local p = rec_find(s, field, HDR + 1, #s, REC)
    if p then
      if string.sub(s, p, p + REC - 1) ~= rec then
        redis.call('SETRANGE', pck, itoa(p - 1), rec)
        fscache[pck] = string.sub(s, 1, p - 1) .. rec .. string.sub(s, p + REC)
      end
      return
    end
    if #s - HDR < QCAP * REC then
      redis.call('APPEND', pck, rec)
      -- read again if another key of the message writes here: building
      -- the string in Lua would cost what APPEND saves
      fscache[pck] = nil
      return
    end
  end
  local olen = ok and string.sub(s, 5, HDR) or ''
  if bk > cb and bk - cb <= cb - oldest then
    -- a message of an earlier bucket than the current string's
    -- (clock skew between hosts): its section of the older string (a
    -- current string a window or more ahead, a clock stepped back,
    -- gives its place to the present below)
    if sup then
      olen = old_put(pok, olen, cb, '', string.sub(field, 3, 4) .. string.sub(e, 1, 4), field, bk, bk, cb, oldest, cap, ttl, blen)
    else
      olen = old_put(pok, olen, cb, rec, '', field, bk, bk, cb, oldest, cap, ttl, blen)
    end
    redis.call('SETRANGE', pck, '4', olen)
    fscache[pck] = string.sub(s, 1, 4) .. olen .. string.sub(s, HDR + 1)
    return
  end
  if bk > cb and bk <= ahead then
    -- a current string a window or more ahead of the message but not of
    -- the clock (ahead: the last bucket not ahead of it): the message's
    -- bucket left the window this string holds, and its pointer is not
    -- kept, as the embedded store's ring refuses it (ahead.go)
    return
  end
  -- a full current string, or one of an earlier bucket: its records
  -- move to the older string, anchored at this bucket (records of
  -- buckets ahead of it are dropped)
  if bk >= oldest and #s > HDR then
    local m, u = cur_split(s)
    olen = old_put(pok, olen, bk, m, u, nil, bk, cb, cb, oldest, cap, ttl, blen)
  elseif ok and olen ~= NOLANES then
    -- an older string anchored at an earlier bucket: re-anchored
    olen = old_put(pok, olen, cb, '', '', nil, bk, cb, cb, oldest, cap, ttl, blen)
  end
  if olen == '' then olen = NOLANES end
  local ns = u32(cb) .. olen .. rec
  redis.call('SET', pck, ns, 'PX', itoa(ttl))
  fscache[pck] = ns
end

-- repoint is model.go's: cls is the class the key keeps (0: a support
-- family's but the line family's).
local function repoint(found, v, ref, cls, weak)
  if not found then return ref * 8 + cls * P32, true end
  local nv = v % P32
  if pref(v) ~= ref or weak then nv = ref * 8 + math.min(v % 8 + 1, 7) end
  nv = nv + cls * P32
  return nv, nv ~= v
end

local function hex4(ref) return string.format('%04x', math.floor(ref / 32768)) end

-- The stored merge (model.go): a merged campaign's record holds its root
-- in field 'a' (4 bytes), a root's its parts in field 'p' (per part: ref,
-- bucket of the merge, 4 bytes each), so that both live as long as the
-- records. APARTS is model.go's AliasParts.
local APARTS = 8
local function xkey(prefix, ref) return prefix .. '{' .. hex4(ref) .. '}:x:' .. string.format('%x', ref) end

-- parts_parse returns the live parts {ref, bucket} of a field 'p'.
local function parts_parse(s, oldest)
  local out = {}
  if not s then return out end
  for i = 1, #s - 7, 8 do
    local at = num(s, i + 4, 4)
    if at >= oldest then out[#out + 1] = {num(s, i, 4), at} end
  end
  return out
end

-- Campaign votes (feedback follows the campaign, store/doc.go): a vote
-- hash per campaign ref in the campaign's slot, written by mode 'v' like a
-- key's. A campaign joined strongly (not weak) has its votes read; a new
-- campaign clears what a dead campaign that held its ref left.
-- cvkey names campaign ref's vote hash (model.go's CampaignVoteKey).
local function cvkey(prefix, ref)
  return prefix .. '{' .. hex4(ref) .. '}:v:campaign:' .. string.format('%08x', ref)
end

-- vote_carry copies the live votes of a merged part's campaign vote
-- hash to its root's (embedded voteBook.carry): a voter who voted on
-- both keeps the later vote; the root's hash lives as long as either.
local function vote_carry(from, to, now, hz)
  local all = redis.call('HGETALL', from)
  local moved = false
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local t = tonumber(string.sub(v, 2)) or 0
    if #f == 6 and t > now - hz then
      local old = redis.call('HGET', to, f)
      if not old or (tonumber(string.sub(old, 2)) or 0) < t then
        redis.call('HSET', to, f, v)
        moved = true
      end
    end
  end
  if moved then
    local n, b, oldest = vote_rebuild(to, now, hz, nil)
    local pt = math.max(redis.call('PTTL', from), redis.call('PTTL', to))
    vote_store(to, n, b, oldest or now, pt > 0 and pt or nil)
  end
end

local function camp_votes(cvk, read, fresh, rs, now, hz)
  if read then return key_votes(cvk, rs, now, hz) end
  if fresh then redis.call('DEL', cvk) end
  return {0, 0, {}}
end

-- camp_keys names a campaign's keys on a single server; the
-- HyperLogLogs' names only when used (most campaigns never have any).
local function camp_keys(prefix, split, ref, nb, cb)
  local base = prefix .. '{' .. hex4(ref) .. '}:'
  local h = string.format('%x', ref)
  local oldest = cb - nb + 1
  local c = setmetatable({}, {__index = function(t, i)
    local k = base .. 'c:' .. h .. ':' .. itoa(oldest + i - 1)
    rawset(t, i, k)
    return k
  end})
  local ck = {f = {}, c = c, x = base .. 'x:' .. h, field = u32(ref), nb = nb}
  local fs = base .. 'f:' .. itoa(ref % split) .. ':'
  for i = 1, nb do ck.f[i] = fs .. itoa(oldest + i - 1) end
  return ck
end

if mode == 'c' or mode == 'r' then
  -- ARGV: mode, nb, blen, ttl, cb, cap, elim, now, hz, nsig, nr, nr
  -- recipients (6 bytes), nsig fields (4 bytes), a '0'/'1' per key (1: a
  -- support family's but the line family's), a '0'/'1' per bucket of the
  -- window, oldest first (1: hidden, store/ahead.go's written); 'c' also
  -- nsig family numbers, fresh ref, network,
  -- sender, prefix, split, the merge guard's class of each family by its
  -- place (model.go's aliasGuard: 'a', 'p' or '-'; '': none), the last
  -- bucket not ahead of the clock.
  -- Returns 'r': per key {pointer or -1, bucket (1-based, 0: none),
  -- notbulk, bulk, votes}; 'c':
  -- {ref, join, count or -1, networks, senders, first, voters (a '0'/'1'
  -- per key), per key {notbulk, bulk, votes} or {} when no key has votes,
  -- the campaign's {notbulk, bulk, votes}}.
  local nb, blen, ttl, cb = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local cap, elim, now, hz = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local nsig, nr = tonumber(ARGV[10]), tonumber(ARGV[11])
  local rs = {}
  for j = 1, nr do rs[j] = ARGV[11 + j] end
  local f0 = 11 + nr
  local sf = ARGV[f0 + nsig + 1]
  local issup = {}
  for s = 1, nsig do issup[s] = string.byte(sf, s) == 49 end
  local oldest = cb - nb + 1
  local hid = ARGV[f0 + nsig + 2]
  for i = 1, nb do hidden[oldest + i - 1] = string.byte(hid, i) == 49 end
  -- KEYS: the nsig current pointer strings, the nsig older ones, the
  -- nsig vote hashes (ranges unpacked as they are, no list built). The
  -- current strings first (one MGET), then the older strings of the keys
  -- not found there (a second).
  local ptrs, at, without = {}, {}, {}
  local vals = mget_range(0, nsig)
  local miss = 0
  for s = 1, nsig do
    local v = vals[s] or ''
    fscache[KEYS[s]] = v
    local bk, here
    ptrs[s], bk, here = cur_read(v, ARGV[f0 + s], cb, oldest)
    if here then without[s] = v end
    if bk then at[s] = bk - oldest + 1 else miss = miss + 1 end
  end
  if miss > 0 and nb > 1 then
    -- each key's lane of its older string, where its current string's
    -- header says it lies (GETRANGE); small strings, and lanes that
    -- disagree with the header, whole in one MGET. A key whose current
    -- string has no header has no older pointers to read.
    local whole, anchor = {}, {}
    for s = 1, nsig do
      local cur = fscache[KEYS[s]]
      if not at[s] and cur_ok(cur) and string.sub(cur, 5, HDR) ~= NOLANES then
        anchor[s] = u32at(cur, 1)
        local l = lane(ARGV[f0 + s], issup[s])
        local total, off, len = 0, 0, 0
        local h = {string.byte(cur, 5, HDR)}
        for i = 0, 2 * LANES - 1 do
          local n = h[2 * i + 1] * 256 + h[2 * i + 2]
          if i < l then off = off + n elseif i == l then len = n end
          total = total + n
        end
        -- ok: nothing (more) to read
        local ok = total == 0 or (total > OLDWHOLE and len == 0)
        if total > OLDWHOLE and len > 0 then
          -- the lane's counts and checks (the whole lane when its length
          -- does not tell how many)
          local cl, pl = lane_sizes(issup[s])
          local b, n = lane_shape(len, cl + pl, nb)
          local want = b and b + n * cl or len
          local v = redis.call('GETRANGE', KEYS[nsig + s], itoa(off), itoa(off + want - 1))
          if #v == want then
            if not b then b, n = lane_counts(v, 1, len, cl + pl, nb) end
            local tot = 0
            for i = 1, b or 0 do tot = tot + string.byte(v, i) end
            if b and tot == n then
              ok = true
              local j, bk = lane_find(v, 1, b, n, cl, ARGV[f0 + s], anchor[s], cb, oldest)
              if j then
                local p = b + n * cl + j * pl -- the pointer's offset in the lane
                if want == len then
                  ptrs[s] = lane_ptr(v, p + 1, pl)
                else
                  local pv = redis.call('GETRANGE', KEYS[nsig + s], itoa(off + p), itoa(off + p + pl - 1))
                  if #pv == pl then ptrs[s] = lane_ptr(pv, 1, pl) else ok = false end
                end
                if ptrs[s] then at[s] = bk - oldest + 1 end
              end
            end
          end
        end
        if not ok then whole[#whole + 1] = s end
      end
    end
    if #whole > 0 then
      local list = {}
      for i, s in ipairs(whole) do list[i] = KEYS[nsig + s] end
      local got = mget(list, function(i) return whole[i] end)
      for i, s in ipairs(whole) do
        local v = got[i] or ''
        fscache[list[i]] = v
        local lanes = v ~= '' and old_lanes(v, string.sub(fscache[KEYS[s]], 5, HDR))
        if lanes then
          local ln = lanes[lane(ARGV[f0 + s], issup[s])]
          local cl, pl = lane_sizes(issup[s])
          local b, n = lane_counts(v, ln[1], ln[2], cl + pl, nb)
          local j, bk
          if b then j, bk = lane_find(v, ln[1], b, n, cl, ARGV[f0 + s], anchor[s], cb, oldest) end
          if j then
            ptrs[s] = lane_ptr(v, ln[1] + b + n * cl + j * pl, pl)
            at[s] = bk - oldest + 1
          end
        end
      end
    end
  end
  -- One EXISTS over every vote hash spares a tally read per key when,
  -- as for most mail, none of the message's keys has votes; the reply
  -- then carries no per-key votes at all.
  local voted = exists_range(2 * nsig, nsig) > 0
  local votes = {}
  if voted or mode == 'r' then
    for s = 1, nsig do
      if voted then
        votes[s] = key_votes(KEYS[2 * nsig + s], rs, now, hz)
      else
        votes[s] = {0, 0, {}}
      end
    end
  end
  if mode == 'r' then
    local out = {}
    for s = 1, nsig do
      out[s] = {ptrs[s] or -1, at[s] or 0, votes[s][1], votes[s][2], votes[s][3]}
    end
    return out
  end
  local a0 = f0 + nsig + 2
  local fams, nfam, nf = {}, {}, 0
  for s = 1, nsig do
    fams[s] = tonumber(ARGV[a0 + s])
    if nfam[fams[s]] == nil and fams[s] >= 0 then nf = nf + 1 end
    nfam[fams[s]] = (nfam[fams[s]] or 0) + 1
  end
  local fresh, origin = tonumber(ARGV[a0 + nsig + 1]), u32(tonumber(ARGV[a0 + nsig + 2]))
  local net, snd = tonumber(ARGV[a0 + nsig + 3]), tonumber(ARGV[a0 + nsig + 4])
  local prefix, split = ARGV[a0 + nsig + 5], tonumber(ARGV[a0 + nsig + 6])
  local aguard = ARGV[a0 + nsig + 7] -- the guard's family classes, or ''
  local ahead = tonumber(ARGV[a0 + nsig + 8]) -- the last bucket not ahead of the clock
  -- a message of a hidden bucket (store/ahead.go's written) writes no
  -- pointer, and its first sighting is not kept
  local old = hidden[cb]
  -- The stored merge (model.go): a pointer naming a merged campaign (its
  -- record's field 'a', the root) is read as the root; raw keeps what is
  -- stored, so that such a key is rewritten to the root.
  local raw, aof = {}, {}
  for s = 1, nsig do
    local v = ptrs[s]
    raw[s] = v
    if v and v % 8 < WEAKCAP then
      local r = pref(v)
      local a = aof[r]
      if a == nil then
        a = redis.call('HGET', xkey(prefix, r), 'a')
        a = (a and #a == 8 and num(a, 5, 4) >= oldest) and num(a, 1, 4) or false
        aof[r] = a
      end
      if a then ptrs[s] = a * 8 + v % 8 + pcls(v) * P32 end
    end
  end
  -- decide (model.go)
  -- a negative family number f is a support family's (supportAlone):
  -- -1 - n - 256 * (the keys it needs to name a campaign alone)
  -- - 65536 * (the share of its keys they must be, in percent)
  -- - 16777216 * (that share for a campaign of other senders, supportSpread,
  --   plus 128 when it adds up with the others that do, supportAdds)
  local function support(f)
    local c = -1 - f
    local x = math.floor(c / 16777216)
    return math.floor(c / 256) % 256, math.floor(c / 65536) % 256, x % 128, x >= 128
  end
  -- the class of the message's sender (model.go's senderClass), which
  -- its line keys get, and the one its main families' pointers get
  -- (decision.cls)
  local sc = 0
  if snd > 0 then sc = 1 + snd % 254 end
  local cls = sc
  local ev, nk, sup = {}, {}, {}
  local mine = {} -- campaigns a spread family's key names that the sender wrote
  for s = 1, nsig do
    if ptrs[s] and ptrs[s] % 8 < WEAKCAP then
      local r = pref(ptrs[s])
      local f = fams[s]
      if f < 0 then
        sup[f] = sup[f] or {}
        sup[f][r] = (sup[f][r] or 0) + 1
        local _, _, sp = support(f)
        if sp > 0 and sc > 0 and pcls(ptrs[s]) == sc then mine[r] = true end
      else
        ev[r] = (ev[r] or 0) + math.floor(UNIT / nfam[f])
        nk[r] = (nk[r] or 0) + 1
      end
    end
  end
  local named = {}
  for r in pairs(ev) do named[r] = true end
  -- the support families that add up count together (model.go's
  -- supportWhole)
  local salone = {}
  for f, refs in pairs(sup) do
    local alone, share, _, adds = support(f)
    if adds then
      for r, k in pairs(refs) do
        if 100 * k >= share * nfam[f] then salone[r] = (salone[r] or 0) + k * (SWHOLE / alone) end
      end
    end
  end
  local spread = {}
  for f, refs in pairs(sup) do
    local alone, share, sp, adds = support(f)
    local unit = math.floor(UNIT / nfam[f])
    for r, k in pairs(refs) do
      local ok = (named[r] or k >= alone or (adds and (salone[r] or 0) >= SWHOLE)) and 100 * k >= share * nfam[f]
      if not ok and sp > 0 and sc > 0 and not mine[r] and k >= alone and 100 * k >= sp * nfam[f] then
        ok, spread[r] = true, true
      end
      if ok then
        ev[r] = (ev[r] or 0) + k * unit
        nk[r] = (nk[r] or 0) + k
      end
    end
  end
  local best, bestEv = 0, -1
  for r, e in pairs(ev) do
    if e > bestEv or (e == bestEv and r < best) then best, bestEv = r, e end
  end
  local ref, join, weak = fresh, false, false
  local voters = {}
  -- the campaigns counted with the joined one (model.go's unionOf)
  local union, inu = {}, {}
  if bestEv >= JOINEV and 100 * bestEv >= SHARE * UNIT * nf then
    ref, join = best, true
    -- the class the main families' voting keys read (campaignClass)
    local c = 0
    for s = 1, nsig do
      local v = ptrs[s]
      if v and v % 8 < WEAKCAP and pref(v) == best and fams[s] >= 0 then
        local k = pcls(v)
        if k ~= 0 then
          if c == 0 then c = k elseif c ~= k then c = 255 end
        end
      end
    end
    if c ~= 0 and sc ~= 0 and sc ~= c then cls = 255 elseif c ~= 0 then cls = c end
    -- one sender's template (model.go)
    weak = (100 * bestEv < WEAKSHARE * UNIT * nf and not spread[best]) or (nk[best] < UKEYS and sc ~= 0 and c == sc)
    if not weak then
      for r, e in pairs(ev) do
        if r ~= best and nk[r] >= UKEYS and 100 * e >= USHARE * UNIT * nf then union[#union + 1] = r end
      end
      table.sort(union, function(a, b)
        if ev[a] ~= ev[b] then return ev[a] > ev[b] end
        return a < b
      end)
      for i = #union, UMAX + 1, -1 do union[i] = nil end
      for _, r in ipairs(union) do inu[r] = true end
    end
  end
  inu[best] = true
  -- voters as characters, not numbers: table.concat formats a number
  -- with sprintf's "%.14g", ~2,000 instructions each
  for s = 1, nsig do
    voters[s] = (join and ptrs[s] and ptrs[s] % 8 < WEAKCAP and inu[pref(ptrs[s])]) and '1' or '0'
  end
  local write = nr > 0
  -- voters as one string of '0'/'1', votes empty when no key has any:
  -- a reply of nested tables costs the server more than the script.
  local out = {ref, join and 1 or 0, -1, 0, 0, 0, table.concat(voters), votes}
  if not join and not write then return out end
  local ck
  if not join then
    for _ = 1, 8 do
      ck = camp_keys(prefix, split, ref, nb, cb)
      if not camp_live(ck, origin, oldest) then break end
      ref = (ref + 1) % (REFMASK + 1)
      ck = nil
    end
    -- after 8 live refs, the ninth (as the embedded store)
    out[1] = ref
  end
  if write and not old then
    for s = 1, nsig do
      local kc = 0 -- the key's class (model.go's repoint)
      if fams[s] >= 0 then
        kc = cls
      else
        local _, _, sp = support(fams[s])
        if sp > 0 then kc = sc end
      end
      local v, changed = repoint(ptrs[s] ~= nil, ptrs[s] or 0, ref, kc, weak and voters[s] == '1')
      if changed or at[s] ~= nb or (raw[s] and raw[s] ~= v) then
        ptr_write(KEYS[s], KEYS[nsig + s], ARGV[f0 + s], issup[s], v, cb, oldest, cap, ttl, blen, ahead, without[s])
      end
    end
  end
  ck = ck or camp_keys(prefix, split, ref, nb, cb)
  ck.nb, ck.cb, ck.ttl, ck.blen, ck.cap, ck.elim, ck.now = nb, cb, ttl, blen, cap, elim, now
  ck.origin, ck.old = origin, old
  local count, nets, snds, first = camp_count(ck, rs, write, net, snd)
  -- the root's live parts (model.go's stored merge); a weak join counts
  -- the campaign alone
  local parts = {}
  local via = not weak
  for s = 1, nsig do
    if voters[s] == '1' and pref(raw[s]) ~= pref(ptrs[s]) then via = true end
  end
  if join and via and count then parts = parts_parse(ck.parts, oldest) end
  if count and (#union > 0 or #parts > 0) then
    -- distinct fingerprints over the campaigns; past an exact tier the
    -- largest HyperLogLog count (model.go's union)
    local seen, n, h = {}, 0, -1
    local function add(fps, hc)
      if hc > h then h = hc end
      for _, fp in ipairs(fps) do
        if not seen[fp] then seen[fp], n = true, n + 1 end
      end
    end
    add(camp_members(ck))
    local uparts = {}
    for _, r in ipairs(union) do
      local uk = camp_keys(prefix, split, r, nb, cb)
      uk.nb, uk.cb, uk.ttl, uk.blen, uk.cap, uk.elim, uk.now = nb, cb, ttl, blen, cap, elim, now
      uk.origin = origin
      uk.parts = ''
      camp_count(uk, rs, write, net, snd)
      add(camp_members(uk))
      uparts[r] = uk.parts
    end
    -- the union's campaigns that pass the guard (model.go's aliasGuard)
    -- become parts of the root (mergeParts), a strong join written
    if write and not weak and aguard ~= '' then
      local inp = {[ref] = true}
      for _, p in ipairs(parts) do inp[p[1]] = true end
      local changed = false
      for _, r in ipairs(union) do
        -- a voting key naming r of AliasFamily, or of two aliasPair
        -- families with WEAKSHARE of the whole evidence
        local guard, one, two, gev = false, nil, false, 0
        for s = 1, nsig do
          local f = fams[s]
          if ptrs[s] and ptrs[s] % 8 < WEAKCAP and pref(ptrs[s]) == r then
            local gi = (f >= 0 and f or (-1 - f) % 256) + 1
            local c = string.sub(aguard, gi, gi)
            if c == 'a' then guard = true end
            if c == 'p' then
              gev = gev + math.floor(UNIT / nfam[f])
              if one and one ~= f then two = true end
              if not one then one = f end
            end
          end
        end
        if two and 100 * gev >= WEAKSHARE * UNIT * nf then guard = true end
        if guard and not inp[r] then
          local padd = {{r, cb}}
          for _, q in ipairs(parts_parse(uparts[r], oldest)) do
            if not inp[q[1]] and q[1] ~= r then padd[#padd + 1] = q end
          end
          if #parts + #padd <= APARTS then
            for _, p in ipairs(padd) do
              parts[#parts + 1] = p
              inp[p[1]] = true
              local px = xkey(prefix, p[1])
              if redis.call('EXISTS', px) == 1 then
                redis.call('HSET', px, 'a', u32(ref) .. u32(p[2]))
                redis.call('HDEL', px, 'p')
              end
              vote_carry(cvkey(prefix, p[1]), cvkey(prefix, ref), now, hz)
            end
            changed = true
          end
        end
      end
      if changed then
        local recs = {}
        for i, p in ipairs(parts) do recs[i] = u32(p[1]) .. u32(p[2]) end
        redis.call('HSET', ck.x, 'p', table.concat(recs))
      end
    end
    local inu = {}
    for _, r in ipairs(union) do inu[r] = true end
    for _, p in ipairs(parts) do
      if not inu[p[1]] then
        local pk = camp_keys(prefix, split, p[1], nb, cb)
        pk.cb = cb
        add(camp_members(pk))
      end
    end
    count = math.max(n, h)
  end
  if count then
    out[3], out[4], out[5], out[6] = count, nets, snds, first
  end
  out[9] = camp_votes(cvkey(prefix, ref), join and not weak, write and not join, rs, now, hz)
  return out
end

if mode == 'q' then
  -- KEYS per candidate ref: its exact set, then its nb first-sighting
  -- strings. ARGV: 'q', nb, candidates, origin, their fields, the
  -- window's oldest bucket. Returns the 0-based index of the first candidate no campaign holds.
  local nb, n, origin = tonumber(ARGV[2]), tonumber(ARGV[3]), u32(tonumber(ARGV[4]))
  local oldest = tonumber(ARGV[5 + n]) -- the window's oldest bucket
  for i = 1, n do
    local kb = (i - 1) * (nb + 1)
    local ck = {x = KEYS[kb + 1], f = {}, nb = nb, field = ARGV[4 + i]}
    for j = 1, nb do ck.f[j] = KEYS[kb + 1 + j] end
    if not camp_live(ck, origin, oldest) then return i - 1 end
  end
  return n
end

if mode == 'w' then
  -- KEYS: per key its current and older pointer strings. ARGV: 'w', ttl,
  -- cap, n, cb, nb, blen, n fields, n pointers, a '0'/'1' per key (1: a
  -- support family's but the line family's), the last bucket not ahead of the clock.
  local ttl, cap, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local cb, nb, blen = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local cur = {}
  for i = 1, n do cur[i] = KEYS[2 * i - 1] end
  fs_mget(cur)
  for i = 1, n do
    ptr_write(KEYS[2 * i - 1], KEYS[2 * i], ARGV[7 + i], string.byte(ARGV[8 + 2 * n], i) == 49,
      tonumber(ARGV[7 + n + i]), cb, cb - nb + 1, cap, ttl, blen, tonumber(ARGV[9 + 2 * n]))
  end
  return n
end

if mode == 'k' then
  -- KEYS: the campaign's nb first-sighting strings, exact set, nb
  -- HyperLogLogs, vote hash. ARGV: 'k', nb, blen, ttl, cb, cap, elim, now,
  -- nr, nr recipients, field, network, sender, write (0 or 1), origin,
  -- campaign votes (0, 'r' read them: a strong join, 'd' drop them: a new
  -- campaign), horizon, members ('1': a union, the reply adds
  -- camp_members' HyperLogLog count and fingerprints), old ('1': keep no
  -- first sighting, store/ahead.go's written).
  -- Returns {count or -1, networks, senders, first, {notbulk, bulk, votes}}.
  local nb = tonumber(ARGV[2])
  local ck = {nb = nb, blen = tonumber(ARGV[3]), ttl = tonumber(ARGV[4]), cb = tonumber(ARGV[5]),
    cap = tonumber(ARGV[6]), elim = tonumber(ARGV[7]), now = tonumber(ARGV[8]), f = {}, c = {}}
  local nr = tonumber(ARGV[9])
  local rs = {}
  for j = 1, nr do rs[j] = ARGV[9 + j] end
  local a = 9 + nr
  ck.field = ARGV[a + 1]
  for i = 1, nb do
    ck.f[i] = KEYS[i]
    ck.c[i] = KEYS[nb + 1 + i]
  end
  ck.x = KEYS[nb + 1]
  ck.origin, ck.old = u32(tonumber(ARGV[a + 5])), ARGV[a + 9] == '1'
  local write = ARGV[a + 4] == '1'
  local count, nets, snds, first = camp_count(ck, rs, write, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  local cv = camp_votes(KEYS[2 * nb + 2], ARGV[a + 6] == 'r', ARGV[a + 6] == 'd', rs, ck.now, tonumber(ARGV[a + 7]))
  if not count then return {-1, 0, 0, 0, cv} end
  if ARGV[a + 8] == '1' then
    -- a union (model.go): the campaign's members too, after this message
    local fps, h = camp_members(ck)
    return {count, nets, snds, first, cv, h, fps}
  end
  return {count, nets, snds, first, cv}
end


return redis.error_reply('unknown mode ' .. tostring(mode))
