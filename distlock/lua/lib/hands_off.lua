-- Piece hands_off: where the key can be handed to a waiter (a lock's, a reentrant
-- lock's).  A waiter takes a handed key only if its attempts asked for it (ARGV[6] of a
-- waiting attempt, the TTL to hand it over with, > 0; a waiter whose grants must reach
-- replicas before its body starts, or that is not renewed, is woken instead, and sends
-- its own attempt).
-- An election's key (the lock's string, run by the lock's scripts) has a leader record
-- beside it: a hash {tok, id, fence} naming the key's last grant, written by the grant
-- itself, in the same step (a campaign's own, or a resignation's or a withdrawal's
-- handoff to the next candidate, whose identity its place keeps, field '#token': see
-- lib/queue.lua), and given the key's TTL, so that it dies with the lease it names
-- (e_renew.lua renews both).  leader() reports it only while the key holds its token
-- (e_leader.lua).
-- Needs: claim_as(token, ttl) (lib/claim.lua or lib/r_claim.lua), included before;
--   RECORD, a local: the leader record's key where the key is an election's, else nil
--   (then KEYS[4] is the queue's places, and ARGV[7] the caller's identity where it
--   campaigns).
-- Defines: handed(token, ttl) -> the fence of the key claimed for token (hand_head's
--   grant); claim() -> the caller's own claim: handed(ARGV[1], ARGV[2]).  Every caller
--   claims a key that is free or token's own (lib/wait.lua claims only then, a release
--   hands off the key it has just deleted, a withdrawal only a free key), so the claim is
--   always a grant, and always written.
local function handed(token, ttl)
  local fence = claim_as(token, ttl)
  if type(fence) == 'table' then fence = fence[2] end
  if RECORD then
    local id = token == ARGV[1] and ARGV[7] or redis.call('HGET', KEYS[4], '#' .. token) or ''
    redis.call('HSET', RECORD, 'tok', token, 'id', id, 'fence', string.format('%.0f', fence))
    redis.call('PEXPIRE', RECORD, ttl)
  end
  return fence
end
local function claim() return handed(ARGV[1], ARGV[2]) end
