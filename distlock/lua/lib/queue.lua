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
--   hand_head(queue, places, wake, grant): the first live waiter gets K (grant(head, ttl)
--   makes it the holder and gives its fence: pushed as '=fence', in full digits (Lua's
--   own number-to-text gives 14 significant digits, and fences have 15), and the waiter leaves
--   the queue) if its place keeps a TTL to be handed K with and grant is not nil, else
--   a wake-up ('1', unless one is already waiting in its list).
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
local function hand_head(queue, places, wake, grant)
  if redis.call('EXISTS', queue) == 0 then return end
  local now = now_ms()
  local head, until_ms = live_head(queue, places, wake, now)
  if not head then return end
  local ttl = grant and redis.call('HGET', places, '>' .. head)
  local element = '1'
  if ttl then
    element = '=' .. string.format('%.0f', grant(head, ttl))
    leave(queue, places, wake, head)
  elseif redis.call('LLEN', wake .. head) > 0 then
    return
  end
  redis.call('RPUSH', wake .. head, element)
  redis.call('PEXPIRE', wake .. head, until_ms - now)
end
local function wake_head(queue, places, wake) hand_head(queue, places, wake, nil) end
