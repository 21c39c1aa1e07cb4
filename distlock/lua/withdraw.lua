-- WITHDRAW: the lock's withdrawal (see lib/withdraw.lua): a key handed to the waiter is
-- deleted, and handed on.
-- KEYS: [1] the lock key, [2] the fence counter, [3] the key's queue, [4] its places.
-- ARGV: as W_ACQUIRE's ([3] and [6] unused).
-- Returns: 1.
-- Spec: Wait.tla RedisLeave; DistLock.tla RedisStep (m.kind = "withdraw")
-- include: read queue
local FENCES = KEYS[2]
-- include: claim hands_off busy drop withdraw
