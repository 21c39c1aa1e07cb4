-- R_WITHDRAW: the reentrant lock's withdrawal (see lib/withdraw.lua): a hash handed to
-- the waiter is deleted, and handed on.
-- KEYS: [1] the lock key, [2] the fence counter, [3] the key's queue, [4] its places.
-- ARGV: as W_ACQUIRE's ([3] and [6] unused).
-- Returns: 1.
-- Spec: Wait.tla RedisLeave
local RECORD = nil  -- no leader record: an election's key alone has one
-- include: read queue r_claim hands_off r_busy drop withdraw
