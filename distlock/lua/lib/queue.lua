-- Piece queue: a key's waiters.  Beside a key K, in K's Cluster slot: its queue (a list
-- of waiters' tokens, in arrival order), the queue's places (a hash: token -> the
-- Redis-clock ms at which that waiter's place expires unless its next attempt renews it;
-- field '>token': the TTL to hand K over with, where the waiter asked for it; field
-- '#token': what the primitive notes of the waiter, an election's candidate's identity
-- for the leader record a handoff writes), and one
-- wake list per waiter, which a release pushes to and the waiter BLPOPs.  A list
-- remembers a wake-up pushed before its waiter blocks, so no release between an attempt
-- and its block is lost.  A place is what a waiter that dies without withdrawing leaves
-- behind; it expires, and whoever next reads the head of the queue drops it.  The queue
-- knows nothing of what is claimed: a primitive's scripts bring that (see lib/wait.lua).
-- Arguments: queue, places (the two keys), wake (the prefix of the wake lists, to which
-- a token is appended).
-- Defines: leave(queue, places, wake, token): the waiter's place and wake list go.
--   live_head(queue, places, wake, now) -> the first waiter whose place is live and the
--   end of its place (nil, 0 if none); expired places before it are dropped.
--   wake_up(wake, token, until_ms, now): a wake-up ('1') for the waiter token, whose
--   place ends at until_ms (as read at now), unless one is already waiting in its list;
--   the list lasts as long as the place.  A script that chose its waiter itself (by
--   role: lib/rw_wake.lua) wakes it so, with the end and the instant it read.
--   hand_head(queue, places, wake, grant): the first live waiter gets K (grant(head, ttl)
--   makes it the holder and gives its fence: pushed as '=fence', in full digits (Lua's
--   own number-to-text gives 14 significant digits, and fences have 15), and the waiter leaves
--   the queue) if its place keeps a TTL to be handed K with and grant is not nil, else
--   wake_up.
--   wake_head(queue, places, wake): hand_head without a grant.
-- include: now
local function leave(queue, places, wake, token)
  redis.call('LREM', queue, 1, token)
  redis.call('HDEL', places, token, '>' .. token, '#' .. token)
  redis.call('DEL', wake .. token)
end
local function live_head(queue, places, wake, now)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil, 0 end
    local until_ms = tonumber(redis.call('HGET', places, head) or '0')
    if until_ms > now then return head, until_ms end
    redis.call('LPOP', queue)
    redis.call('HDEL', places, head, '>' .. head, '#' .. head)
    redis.call('DEL', wake .. head)
  end
end
local function wake_up(wake, token, until_ms, now)
  if redis.call('LLEN', wake .. token) > 0 then return end
  redis.call('RPUSH', wake .. token, '1')
  redis.call('PEXPIRE', wake .. token, until_ms - now)
end
local function hand_head(queue, places, wake, grant)
  if redis.call('EXISTS', queue) == 0 then return end
  local now = now_ms()
  local head, until_ms = live_head(queue, places, wake, now)
  if not head then return end
  local ttl = grant and redis.call('HGET', places, '>' .. head)
  if not ttl then return wake_up(wake, head, until_ms, now) end
  local element = '=' .. string.format('%.0f', grant(head, ttl))
  leave(queue, places, wake, head)
  redis.call('RPUSH', wake .. head, element)
  redis.call('PEXPIRE', wake .. head, until_ms - now)
end
local function wake_head(queue, places, wake) hand_head(queue, places, wake, nil) end
