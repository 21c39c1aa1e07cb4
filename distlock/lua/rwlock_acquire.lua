-- RWLOCK_ACQUIRE: the read-write lock's acquire, a reader's or a writer's, fail-fast or
-- waiting (lib/rw.lua has the data).  A reader is granted when no writer is live and no
-- live writer's place is before its own in the queue (before any, for an attempt that
-- has none): readers share, and a writer that waits is passed by no reader that comes
-- after it.  A writer is granted when no writer and no reader is live and no live place
-- is before its own (before any, for an attempt that has none): FIFO otherwise.  Our own
-- live lease (a resend of an attempt that was granted) is granted again, whatever else
-- holds or waits: a reader's re-scored, a writer's expiry re-set, with its fence.
-- A refused waiting attempt keeps its live place (or takes one at the tail: an ended
-- place is no place, as if it had never waited), which ends a grace after the longest
-- block it may take (so a waiter that died is dropped within LONGEST_BLOCK + grace of
-- its last attempt); a refused last attempt leaves the queue, waking the next waiter if
-- it was first and the next may now be granted; a refused fail-fast attempt leaves the
-- queue as it is.  A reader's grant wakes the next waiter if it is a reader (readers
-- reach the key one after another, each woken by the one before).
-- KEYS: [1] the key, [2] its readers, [3] the fence counter, [4] the key's queue, [5] its
--   places.
-- ARGV: [1] token, [2] ttl ms, [3] 'read' or 'write', [4] the ms the caller may still
--   wait (0: its last attempt; -1: a fail-fast attempt, out of any queue),
--   [5] QUEUE_GRACE_MS, [6] the wake lists' prefix.
-- Substitutes: ${LONGEST_BLOCK_MS}, distlock._core.waiting.LONGEST_BLOCK_MS.
-- Returns: fail-fast, {1, fence} granted, {0, 0} refused; waiting, {fence, 0} granted,
--   {0, ms} refused, queued, may block up to ms, {0, 0} the last attempt refused, out of
--   the queue.  A writer's fence is new (lib/fence.lua); a reader's is the counter as it
--   stands (made, if the slot has none yet), shared with the other readers.
-- Spec: ReadWrite.tla RedisStep (m.kind = "acquire")
-- include: rw rw_wake fence
local LONGEST_BLOCK = ${LONGEST_BLOCK_MS}
local token, ttl, writing = ARGV[1], tonumber(ARGV[2]), ARGV[3] == 'write'
local left = tonumber(ARGV[4])
local queue, places, wake = KEYS[4], KEYS[5], ARGV[6]
local foreign, writer, wfence, wuntil, readers, last = rw_state()
local mine = false
if not foreign then
  if writing then mine = writer == token
  else mine = redis.call('ZSCORE', KEYS[2], token) ~= false end
end
-- How long, at most, the key keeps this role out, whoever waits (0: it does not).
local busy = 0
if foreign then
  busy = redis.call('PTTL', KEYS[1])
  if busy <= 0 then busy = tonumber(ARGV[5]) end
elseif writer then
  busy = writing and math.max(wuntil, last) - NOW or wuntil - NOW
elseif writing and readers > 0 then
  busy = last - NOW
end
-- The first live place (head) and the end of the place that keeps us waiting (ahead).
local queued = not mine and redis.call('EXISTS', queue) == 1
local head, head_until, ahead = nil, 0, nil
if queued then
  head, head_until = live_head(queue, places, wake, NOW)
  if writing then
    if head and head ~= token then ahead = head_until end
  elseif head then
    local own = tonumber(redis.call('HGET', places, token) or '0') > NOW
    for _, t in ipairs(redis.call('LRANGE', queue, 0, -1)) do
      if t == token and own then break end
      if t ~= token and is_writer(places, t) then
        local ends = tonumber(redis.call('HGET', places, t) or '0')
        if ends > NOW then ahead = ends break end
      end
    end
  end
end
if mine or (busy <= 0 and not ahead) then
  local fence
  local ends = NOW + ttl
  if writing then
    if mine then
      fence = wfence
      redis.call('HSET', KEYS[1], 'x', ms(ends))
    else
      fence = next_fence(KEYS[3])
      redis.call('HSET', KEYS[1], 'rw', '1', 'w', token, 'f', ms(fence), 'x', ms(ends))
    end
    settle(ends)
  else
    redis.call('ZADD', KEYS[2], ms(ends), token)
    redis.call('HSET', KEYS[1], 'rw', '1')
    settle(wuntil)
    fence = tonumber(redis.call('GET', KEYS[3]) or next_fence(KEYS[3]))
  end
  if queued or (mine and not writing) then
    leave(queue, places, wake, token)
    if not writing then wake_next(queue, places, wake, nil, 1) end
  end
  if left < 0 then return {1, fence} end
  return {fence, 0}
end
if left < 0 then return {0, 0} end
if left == 0 then
  leave(queue, places, wake, token)
  -- First in line, we kept out whoever is behind us (a writer keeps out the readers that
  -- a live reader's lease does not): as RWLOCK_WITHDRAW, wake the next if it may come in.
  if head == token and not foreign then wake_next(queue, places, wake, writer, readers) end
  return {0, 0}
end
local recheck = busy
if ahead then
  -- Free, but a waiter before us goes first: it may take the key and let it lapse (it
  -- died) before its place ends, so look again within a lease from now at the latest.
  if recheck <= 0 then
    recheck = math.min(ahead - NOW, ttl)
  else
    recheck = math.min(recheck, ahead - NOW)
  end
end
if head and head ~= token then
  -- Behind another waiter: if its place ends holding the wake-up (it gave up or died),
  -- we are first with nobody to wake us, so look again by then.
  recheck = math.min(recheck, head_until - NOW)
end
recheck = math.max(1, recheck)
local life = math.min(left, recheck, LONGEST_BLOCK) + tonumber(ARGV[5])
local had = redis.call('HGET', places, token)
if had and tonumber(had) <= NOW then
  -- An ended place is no place (a reader would pass the writers queued since): the
  -- attempt queues again, at the tail.
  redis.call('LREM', queue, 1, token)
  had = nil
end
if not had then redis.call('RPUSH', queue, token) end
-- A place never ends earlier than it was promised: whoever is behind it counts on that.
redis.call('HSET', places, token, math.max(tonumber(had or '0'), NOW + life))
if writing then redis.call('HSET', places, '>' .. token, 'w') end
-- Whatever a release left in our wake list came before this refusal.
redis.call('DEL', wake .. token)
if redis.call('PTTL', queue) < life then
  redis.call('PEXPIRE', queue, life)
  redis.call('PEXPIRE', places, life)
end
return {0, recheck}
