-- RWLOCK_RELEASE: the read-write lock's release, a reader's or a writer's: our lease
-- removed if it is live (a writer's hash fields only if they hold our token), and our
-- place dropped either way (the cleanup of a waiter whose attempt got no answer).  The
-- key goes with its last lease.  The record is a short-lived key per token, as the
-- lock's (release.lua): a resend of the release is answered as released.  The first
-- waiter is woken in the same step if its attempt would now be granted.
-- KEYS: [1] the key, [2] its readers, [3] this token's release record, [4] the key's
--   queue, [5] its places.
-- ARGV: [1] token, [2] the record's life, ms (RELEASE_MEMORY_MS), [3] 'read' or
--   'write', [4] the wake lists' prefix.
-- Returns: 1 if our lease was live and is now removed, or if this token's release
--   already removed it (a resend); else 0.
-- Spec: ReadWrite.tla RedisStep (m.kind = "release")
-- include: rw rw_wake
local token, queue, places, wake = ARGV[1], KEYS[4], KEYS[5], ARGV[4]
local foreign, writer, _, wuntil, readers = rw_state()
local hit = false
if not foreign then
  if ARGV[3] == 'write' then
    if writer == token then
      redis.call('HDEL', KEYS[1], 'w', 'f', 'x')
      hit, writer, wuntil = true, nil, 0
    end
  elseif redis.call('ZREM', KEYS[2], token) == 1 then
    hit, readers = true, readers - 1
  end
end
if redis.call('EXISTS', queue) == 1 then leave(queue, places, wake, token) end
if hit then
  settle(wuntil)
  redis.call('SET', KEYS[3], token, 'PX', ARGV[2])
  wake_next(queue, places, wake, writer, readers)
  return 1
end
if redis.call('GET', KEYS[3]) == token then return 1 end
return 0
