-- Piece drop: a withdrawal's give-back where keys are handed (a lock's, a reentrant
-- lock's; see lib/withdraw.lua): a key that holds the withdrawing waiter's token (handed
-- to it, or granted by an attempt whose reply it never read) is deleted, and handed on.
-- Needs: handed (lib/hands_off.lua), included before.
-- Defines: drop() -> true, the key deleted; GRANT = handed.
local function drop() redis.call('DEL', KEYS[1]) return true end
local GRANT = handed
