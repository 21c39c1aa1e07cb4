-- RWLOCK_WITHDRAW: a read-write lock's waiter stops waiting: its place and wake list go.
-- Nothing was handed (an attempt granted late is given back by the client's own
-- release); if it was first in line, the next waiter is woken when its attempt would be
-- granted now: a wake-up is never dropped with its waiter.
-- KEYS: as RWLOCK_ACQUIRE's ([3] unused).
-- ARGV: as RWLOCK_ACQUIRE's ([2] to [5] unused).
-- Returns: 1.
-- Spec: ReadWrite.tla RedisStep (m.kind = "leave")
-- include: rw rw_wake
local token, queue, places, wake = ARGV[1], KEYS[4], KEYS[5], ARGV[6]
local head = live_head(queue, places, wake, NOW)
leave(queue, places, wake, token)
if head == token then
  local foreign, writer, _, _, readers = rw_state()
  if not foreign then wake_next(queue, places, wake, writer, readers) end
end
return 1
