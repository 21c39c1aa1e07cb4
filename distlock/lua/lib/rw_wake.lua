-- Piece rw_wake: waking a read-write lock's first waiter (the queue of lib/queue.lua, a
-- writer's place marked by its field '>token' = 'w').  Nothing is handed: a woken waiter
-- attempts, and its attempt decides.
-- Defines: is_writer(places, token) -> whether token's place is a writer's.
--   wake_next(queue, places, wake, writer, readers): wakes the first live waiter if its
--   attempt would be granted now (a reader: no live writer; a writer: nobody holds), so
--   that a reader's release does not wake a writer that other readers still keep out.
--   The wake-up goes to the waiter chosen, at NOW, not through wake_head: that reads TIME
--   again (it moves on within a script), and a first place ending in between would pass
--   the wake-up to the next waiter, whatever its role.
-- include: rw queue
local function is_writer(places, token)
  return redis.call('HEXISTS', places, '>' .. token) == 1
end
local function wake_next(queue, places, wake, writer, readers)
  if writer or redis.call('EXISTS', queue) == 0 then return end
  local head, until_ms = live_head(queue, places, wake, NOW)
  if not head or (readers > 0 and is_writer(places, head)) then return end
  wake_up(wake, head, until_ms, NOW)
end
