-- Piece hands_off: where the key can be handed to a waiter (a lock's, a reentrant
-- lock's).  A waiter takes a handed key only if its attempts asked for it (ARGV[6] of a
-- waiting attempt, the TTL to hand it over with, > 0; a waiter whose grants must reach
-- replicas before its body starts, or that is not renewed, is woken instead, and sends
-- its own attempt).
-- Needs: claim_as(token, ttl) (lib/claim.lua or lib/r_claim.lua), included before.
-- Defines: handed(token, ttl) -> the fence of the key claimed for token (hand_head's
--   grant); claim() -> the caller's own claim: claim_as(ARGV[1], ARGV[2]).
local function handed(token, ttl)
  local fence = claim_as(token, ttl)
  if type(fence) == 'table' then fence = fence[2] end
  return fence
end
local function claim() return claim_as(ARGV[1], ARGV[2]) end
