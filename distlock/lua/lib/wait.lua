-- Piece wait: the body of every waiting acquire (w_acquire.lua, rw_acquire.lua,
-- sw_acquire.lua); it ends the script.  KEYS[1] the key, KEYS[2] the fence counter (the
-- claim's own), KEYS[3] the queue, KEYS[4] its places; ARGV[1] token, ARGV[2] TTL ms,
-- ARGV[3] the ms the caller may still wait (0: its last attempt), ARGV[4] how long a
-- place outlives its block, ms (QUEUE_GRACE_MS), ARGV[5] the wake lists' prefix.
-- Needs: busy() (0 if the caller may claim now, else the ms until a claim may be
--   possible; and whether the key is ours), claim() (the primitive's plain acquire),
--   room() (whether the key can take another holder right after a grant: then the next
--   waiter is woken at once), HANDOFF (whether a refused waiter's place keeps ARGV[6],
--   the TTL a release hands it the key with: field '>token', see lib/queue.lua), NOTE
--   (what a refused waiter's place keeps of it besides, field '#token', or nil).
-- Substitutes: ${LONGEST_BLOCK_MS}, distlock._core.waiting.LONGEST_BLOCK_MS (the longest
--   block a waiter takes, ms), written in by the loader (distlock/_lua.py).  No block is
--   longer, so neither is a place's life, less its grace.
-- Returns: {fence, 0} when granted: if the key is free and nobody waits before us, or if
--   it is ours already (a resend of an attempt that was granted, or a key handed to us);
--   our place, our wake list and any wake-up in it go.  {0, ms} when refused: we are in
--   the queue (at our old place, if we had one) and may block for up to ms, the time the
--   refusal can last at most: the holder's remaining TTL, cut to the rest of the first
--   waiter's place when that is another's (it may give up holding the wake-up); or, when
--   the key is free but another waiter is first, the rest of that waiter's place, cut to
--   one lease (it may take the key and let it lapse).  A place's end never moves
--   earlier.  {0, 0}: the last attempt was refused, and we are out of the queue.
-- include: queue
local LONGEST_BLOCK = ${LONGEST_BLOCK_MS}
local token, queue, places, wake = ARGV[1], KEYS[3], KEYS[4], ARGV[5]
local now = now_ms()
local head, head_until = live_head(queue, places, wake, now)
local busy_ms, mine = busy()
if mine or (busy_ms == 0 and (not head or head == token)) then
  local fence = claim()
  if type(fence) == 'table' then fence = fence[2] end
  leave(queue, places, wake, token)
  if room() then wake_head(queue, places, wake) end
  return {fence, 0}
end
local left = tonumber(ARGV[3])
if left <= 0 then
  leave(queue, places, wake, token)
  return {0, 0}
end
local recheck = busy_ms
if recheck == 0 then
  -- Free, but another waiter is first: it may take the key and let it lapse (it died)
  -- before its place ends, so look again within a lease from now.
  recheck = math.min(head_until - now, tonumber(ARGV[2]))
elseif head and head ~= token then
  -- Behind another waiter: if its place ends holding the wake-up (it gave up or died),
  -- we are first with nobody to wake us, so look again by then.
  recheck = math.min(recheck, head_until - now)
end
recheck = math.max(1, recheck)
-- The place ends a grace after the longest block we may take, so that a waiter that
-- died is dropped within LONGEST_BLOCK + grace of its last attempt, whatever the TTL.
local life = math.min(left, recheck, LONGEST_BLOCK) + tonumber(ARGV[4])
local had = redis.call('HGET', places, token)
if not had then redis.call('RPUSH', queue, token) end
-- A place never ends earlier than it was promised: whoever is behind it counts on that.
redis.call('HSET', places, token, math.max(tonumber(had or '0'), now + life))
-- The TTL a release hands us the key with: short, until our first renewal.
if HANDOFF then redis.call('HSET', places, '>' .. token, ARGV[6]) end
if NOTE then redis.call('HSET', places, '#' .. token, NOTE) end
-- Whatever a release left in our wake list came before this refusal: a key handed to us
-- that has since expired (and been taken by another), or a wake-up this attempt answers.
redis.call('DEL', wake .. token)
if redis.call('PTTL', queue) < life then
  redis.call('PEXPIRE', queue, life)
  redis.call('PEXPIRE', places, life)
end
return {0, recheck}
