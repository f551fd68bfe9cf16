/**
 * The Redis side of leased rate-limit slices (redisRateLimiter.ts), one script for every call: it expires the
 * slices that left the window, applies a process's returns, and grants a new slice, atomically on Redis's clock.
 *
 * Per API key: a sorted set of slices (member: the slice's id; score: the latest time a request can be admitted
 * from it, so the window holds it until a window after that), two hashes of each slice's requests and tokens, and
 * their totals. A slice counts in full until its holder returns what it did not use, so the slices in the window
 * never add up to more than the key's limits.
 *
 * KEYS: slices (zset), requests (hash), tokens (hash), totals (hash r, t).
 * ARGV: rpm, tpm (0: none), need requests, need tokens (the first queued request's: nothing is granted unless it
 * fits), want requests, want tokens (every queued request's, granted as far as the window has room), extra
 * requests, extra tokens (ahead of need: at most half of the room left after the want), the new slice's id, this
 * process's id prefix, slice life ms, window ms, then returns: kind, slice id, requests, tokens (`c`: the slice is
 * closed with these as what it admitted; `a`: its tokens are corrected by the given amount).
 * Returns: status (0, or 1 requests / 2 tokens / 3 both refused for the need), granted requests, granted tokens,
 * total requests, total tokens, ms until the need would fit (requests, tokens), requests and tokens in other
 * processes' live slices, ms until the first of those ends, ms until the window holds nothing it holds now.
 */
export const SLICE_SCRIPT = `
local sk, rk, tk, nk = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local needR, needT, wantR, wantT = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local extraR, extraT = tonumber(ARGV[7]), tonumber(ARGV[8])
local id, tag, life, win = ARGV[9], ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12])
local function int(x) return string.format('%d', x) end
local function counts(sid)
  return tonumber(redis.call('HGET', rk, sid) or '0'), tonumber(redis.call('HGET', tk, sid) or '0')
end
local function drop(sid)
  redis.call('ZREM', sk, sid)
  redis.call('HDEL', rk, sid)
  redis.call('HDEL', tk, sid)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local totR = tonumber(redis.call('HGET', nk, 'r') or '0')
local totT = tonumber(redis.call('HGET', nk, 't') or '0')
local changed = false
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', sk, '-inf', now - win)) do
  local r, n = counts(sid)
  totR, totT = totR - r, totT - n
  drop(sid)
  changed = true
end
for i = 13, #ARGV, 4 do
  local kind, sid = ARGV[i], ARGV[i + 1]
  local s = redis.call('ZSCORE', sk, sid)
  if s then
    local r0, t0 = counts(sid)
    local r1, t1 = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    if kind == 'a' then r1, t1 = r0 + r1, math.max(0, t0 + t1) end
    totR, totT = totR + r1 - r0, totT + t1 - t0
    if kind == 'c' and r1 == 0 and t1 == 0 then
      drop(sid)
    else
      redis.call('HSET', rk, sid, int(r1))
      redis.call('HSET', tk, sid, int(t1))
      -- Closed: nothing more is admitted from it, so it leaves the window a window after now.
      if kind == 'c' and tonumber(s) > now then redis.call('ZADD', sk, int(now), sid) end
    end
    changed = true
  end
end
if redis.call('ZCARD', sk) == 0 then totR, totT = 0, 0 end
totR, totT = math.max(0, totR), math.max(0, totT)
local roomR, roomT = rpm - totR, tpm - totT
local status, gR, gT = 0, 0, 0
if rpm > 0 and needR > roomR then status = 1 end
if tpm > 0 and needT > roomT then status = status + 2 end
if status == 0 and wantR + wantT + extraR + extraT > 0 then
  if rpm > 0 then
    gR = math.max(0, math.min(wantR, roomR))
    gR = gR + math.min(extraR, math.max(0, math.floor((roomR - gR) / 2)))
  end
  if tpm > 0 then
    gT = math.max(0, math.min(wantT, roomT))
    gT = gT + math.min(extraT, math.max(0, math.floor((roomT - gT) / 2)))
  end
  if gR + gT > 0 then
    redis.call('ZADD', sk, int(now + life), id)
    redis.call('HSET', rk, id, int(gR))
    redis.call('HSET', tk, id, int(gT))
    totR, totT = totR + gR, totT + gT
    changed = true
  end
end
if changed then
  redis.call('HSET', nk, 'r', int(totR), 't', int(totT))
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, win + life) end
end
local retryR, retryT, heldR, heldT, soonest = 0, 0, 0, 0, 0
if status > 0 then
  local es = redis.call('ZRANGE', sk, 0, -1, 'WITHSCORES')
  local fR, fT, atR, atT = 0, 0, nil, nil
  for i = 1, #es, 2 do
    local sid, sc = es[i], tonumber(es[i + 1])
    local r, n = counts(sid)
    fR, fT = fR + r, fT + n
    if not atR and totR - fR + needR <= rpm then atR = sc end
    if not atT and totT - fT + needT <= tpm then atT = sc end
    if sc > now and string.sub(sid, 1, #tag) ~= tag then
      heldR, heldT = heldR + r, heldT + n
      if soonest == 0 or sc - now < soonest then soonest = sc - now end
    end
  end
  if status % 2 == 1 then retryR = (atR or now) + win - now end
  if status >= 2 then retryT = (atT or now) + win - now end
end
local reset = 0
local last = redis.call('ZRANGE', sk, -1, -1, 'WITHSCORES')
if #last > 0 then reset = tonumber(last[2]) + win - now end
return {status, gR, gT, totR, totT, retryR, retryT, heldR, heldT, soonest, reset}
`;
