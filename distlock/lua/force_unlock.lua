-- FORCE_UNLOCK: an operator takes a key away (Lock.force_unlock; see
-- distlock/_operator.py).  Deletes the key whatever holds it and bumps the fence
-- counter in the same step, so every later owner's fence is larger than the evicted
-- holder's even if a resource saw that one; wakes each kind's first waiter (woken, not
-- handed the key: its own attempt takes it, with a fence of its own).
-- KEYS: [1] the key, [2] its slot's fence counter, then each kind's queue and its places
--   (KEYS[1 + 2i], KEYS[2 + 2i]), then any keys that hold the key's leases besides it
--   (a read-write lock's readers), deleted with it.
-- ARGV: [i] that kind's wake lists' prefix.
-- Returns: 1 if a key was deleted, else 0.
-- Spec: none: an operator's script, outside every model.
-- include: queue fence
local deleted = redis.call('DEL', KEYS[1])
for i = 3 + 2 * #ARGV, #KEYS do deleted = math.max(deleted, redis.call('DEL', KEYS[i])) end
next_fence(KEYS[2])
for i = 1, #ARGV do wake_head(KEYS[1 + 2 * i], KEYS[2 + 2 * i], ARGV[i]) end
return deleted
