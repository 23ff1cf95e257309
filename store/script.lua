-- bulkmilter store script, key schema bm1 (see store/doc.go).
--
-- Every key a call touches is declared in KEYS and shares one hash tag, so
-- the script runs in one cluster slot. All writes are idempotent (HSET,
-- PFADD, recomputed tallies): running a call twice, as a client retry after
-- a timeout may do, leaves the same state and returns the same counts.
--
-- ARGV[1] is the mode: 'o' observe, 'v' vote.

local CHUNK = 1000 -- arguments per command, below Lua's stack limit

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
  redis.call('HSET', k, '#', n .. ',' .. b .. ',' .. oldest)
  if ttlms then redis.call('PEXPIRE', k, ttlms) end
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
-- ARGV: 'o', nb (buckets read), bucket length (ms), ttl of current-bucket
-- keys (ms), current bucket, first-sighting capacity (records), exact
-- limit, now (unix s), vote horizon (s), nsig, nr, then nr recipient
-- pseudonyms (6 bytes), then nsig first-sighting fields (4 bytes).
-- KEYS, per signature (2*nb+2): nb first-sighting strings (oldest first),
-- the signature hash (exact set, or the HyperLogLog marker), nb
-- HyperLogLogs (oldest first), the vote hash.
-- Returns per signature {count, notbulk, bulk, {i, vote, i, vote, ...}}
-- where i is the 1-based index of a recipient who voted.

local nb = tonumber(ARGV[2])
local blen = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local cb = tonumber(ARGV[5])
local cap = tonumber(ARGV[6])
local elim = tonumber(ARGV[7])
local now = tonumber(ARGV[8])
local hz = tonumber(ARGV[9])
local nsig = tonumber(ARGV[10])
local nr = tonumber(ARGV[11])
local r0 = 11
local f0 = r0 + nr
local kper = 2 * nb + 2
local oldest = cb - nb + 1

local rs, fps = {}, {}
for j = 1, nr do
  rs[j] = ARGV[r0 + j]
  fps[j] = string.sub(rs[j], 3, 6) -- the pseudonym's low 32 bits
end

local function ttlof(bk) return ttl - (cb - bk) * blen end

-- First sightings: a string of 8-byte records, 4 bytes of the signature's
-- hash then 4 bytes of the recipient's pseudonym, one string per hash tag,
-- split and bucket. Packed records cost 8 bytes where a hash entry costs
-- 16 to 20. Strings read in this call are cached (one GET each).
local REC = 8
local fscache = {}

local function fs_get(k)
  local s = fscache[k]
  if s == nil then
    s = redis.call('GET', k) or ''
    fscache[k] = s
  end
  return s
end

-- fs_prefetch reads, in one MGET, the first-sighting strings of a
-- signature this call has not read yet: every bucket is read when the
-- signature is new, the usual case.
local function fs_prefetch(kb)
  local missing = {}
  for i = 1, nb do
    local k = KEYS[kb + i]
    if fscache[k] == nil then missing[#missing + 1] = k end
  end
  if #missing == 0 then return end
  local vals = redis.call('MGET', unpack(missing))
  for i, k in ipairs(missing) do
    fscache[k] = vals[i] or ''
  end
end

local function fs_find(s, field)
  local init = 1
  while true do
    local p = string.find(s, field, init, true)
    if not p then return nil end
    if (p - 1) % REC == 0 then return p end
    init = p + 1
  end
end

-- fs_put appends a record to the current bucket's string if it has room;
-- a new string gets its TTL. The string is written whole with SET, not
-- with APPEND: APPEND leaves the string with up to as much spare room as
-- it holds (Redis grows it by doubling), which measured 484 bytes per
-- message at 29 keys against 270 with SET.
local function fs_put(k, field, fp)
  local s = fs_get(k)
  if #s >= cap * REC then return false end
  local ns = s .. field .. fp
  if s == '' then
    redis.call('SET', k, ns, 'PX', ttl)
  else
    redis.call('SET', k, ns, 'KEEPTTL')
  end
  fscache[k] = ns
  return true
end

local function fs_del(k, field)
  local s = fs_get(k)
  local p = fs_find(s, field)
  if not p then return end
  local ns = string.sub(s, 1, p - 1) .. string.sub(s, p + REC)
  if ns == '' then
    redis.call('DEL', k)
  else
    redis.call('SET', k, ns, 'KEEPTTL')
  end
  fscache[k] = ns
end

-- The exact set maps a recipient pseudonym (6 bytes) to the last bucket it
-- was seen in; the field '#' holds "bucket:count ..." for those buckets, so
-- the live count is a sum over at most nb numbers. The first recipient of a
-- promoted signature is known only by its 4-byte fingerprint: it enters as
-- '~'..fingerprint and is replaced by the full pseudonym when that
-- recipient shows up again.
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
  for i, bk in ipairs(bks) do parts[i] = bk .. ':' .. t[bk] end
  return table.concat(parts, ' ')
end

-- exact_live and exact_add take the '#' field as the caller read it.
local function exact_live(hash)
  local live = 0
  for bk, c in pairs(counts_parse(hash)) do
    if bk >= oldest then live = live + c end
  end
  return live
end

-- exact_add records entries {member, bucket} in the exact set and returns
-- the live count, or nil after converting the set to per-bucket
-- HyperLogLogs because it outgrew the exact limit.
local function exact_add(kb, x, entries, hash)
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
      -- the recipient, or the first recipient known by its fingerprint
      ph = '~' .. string.sub(r, 3, 6)
      local v = redis.call('HMGET', x, r, ph)
      old, pv = tonumber(v[1] or ''), tonumber(v[2] or '')
    else
      old = tonumber(redis.call('HGET', x, r) or '')
    end
    if old == nil and pv ~= nil then
      redis.call('HDEL', x, ph)
      redis.call('HSET', x, r, pv)
      old = pv
    end
    if old == nil then
      redis.call('HSET', x, r, bk)
      t[bk] = (t[bk] or 0) + 1
    elseif old < bk then
      redis.call('HSET', x, r, bk)
      t[old] = (t[old] or 1) - 1
      t[bk] = (t[bk] or 0) + 1
    end
  end
  local live, maxb = 0, cb
  for bk, c in pairs(t) do
    live = live + c
    if c > 0 and bk > maxb then maxb = bk end
  end
  if live > elim then
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
    redis.call('DEL', x)
    for bk, list in pairs(per) do
      local ck = KEYS[kb + nb + 2 + (bk - oldest)]
      chunks('PFADD', ck, list, 1, #list)
      redis.call('PEXPIRE', ck, ttlof(bk))
    end
    return nil
  end
  redis.call('HSET', x, '#', counts_format(t))
  redis.call('PEXPIRE', x, ttlof(maxb))
  return live
end

local out = {}
for s = 1, nsig do
  local kb = (s - 1) * kper
  local field = ARGV[f0 + s]
  local cur_fs = KEYS[kb + nb]
  local x = KEYS[kb + nb + 1]
  local cur_c = KEYS[kb + 2 * nb + 1]
  local vk = KEYS[kb + 2 * nb + 2]

  -- One read tells the tier: the signature's own hash holds the exact
  -- set ('#' = per-bucket counts) or, once counted by HyperLogLog, the
  -- marker field 'h'. Neither: first sightings only.
  local mode = redis.call('HMGET', x, '#', 'h')
  local hll = mode[2] ~= false
  local count
  if not hll and mode[1] then
    if nr == 0 then
      count = exact_live(mode[1])
    else
      local entries = {}
      for j = 1, nr do entries[j] = {rs[j], cb} end
      count = exact_add(kb, x, entries, mode[1])
      if count == nil then hll = true end
    end
  elseif not hll then
    local first, fbk
    fs_prefetch(kb)
    for i = nb, 1, -1 do
      local str = fs_get(KEYS[kb + i])
      local p = fs_find(str, field)
      if p then
        first = string.sub(str, p + 4, p + 7)
        fbk = oldest + i - 1
        break
      end
    end
    if nr == 0 then
      if first then count = 1 else count = 0 end
    else
      local same = first ~= nil
      for j = 1, nr do
        if fps[j] ~= first then
          same = false
          break
        end
      end
      if first == nil and nr == 1 and fs_put(cur_fs, field, fps[1]) then
        count = 1
      elseif same and (fbk == cb or fs_put(cur_fs, field, first)) then
        -- seen again by the same recipient: the sighting moves to the
        -- current bucket
        count = 1
      else
        -- a second distinct recipient (or a full first-sighting string):
        -- promote to the exact set, or straight to HyperLogLog
        local entries = {}
        if first then
          for i = 1, nb do fs_del(KEYS[kb + i], field) end
          entries[1] = {'~' .. first, fbk}
        end
        for j = 1, nr do entries[#entries + 1] = {rs[j], cb} end
        if #entries <= elim then
          count = exact_add(kb, x, entries, mode[1])
          if count == nil then hll = true end
        else
          if first then
            local ck = KEYS[kb + nb + 2 + (fbk - oldest)]
            redis.call('PFADD', ck, '~' .. first)
            redis.call('PEXPIRE', ck, ttlof(fbk))
          end
          hll = true
        end
      end
    end
  end
  if hll then
    if nr > 0 then
      chunks('PFADD', cur_c, rs, 1, nr)
      redis.call('PEXPIRE', cur_c, ttl)
      redis.call('HSET', x, 'h', '1')
      redis.call('PEXPIRE', x, ttl)
    end
    count = redis.call('PFCOUNT', unpack(KEYS, kb + nb + 2, kb + 2 * nb + 1))
  end

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
  out[s] = {count, n, b, uv}
end
return out
