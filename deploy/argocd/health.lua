-- Argo CD health check for peering.liqo-operator.io/LiqoPeering.
-- Argo CD runs it with gopher-lua (Lua 5.1): `obj` is the live object, the result a {status, message}
-- table. Install it with argocd-cm-snippet.yaml.
--
--   deleting (metadata.deletionTimestamp)                      -> Progressing
--   no status yet, or status.observedGeneration stale          -> Progressing
--   peerStatus error or timeout, or condition Stalled=True      -> Degraded (Stalled, else Ready message)
--   peerStatus ready and condition Ready=True                   -> Healthy
--   anything else (establishing, no_peers, ready not yet True)  -> Progressing

local function condition(status, condType)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == condType then
      return c
    end
  end
  return nil
end

local function message(cond, fallback)
  if cond ~= nil and cond.message ~= nil and cond.message ~= "" then
    return cond.message
  end
  return fallback
end

local hs = {}
local meta = obj.metadata or {}
local status = obj.status

if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "LiqoPeering is being deleted: the operator is tearing the peering down"
  return hs
end

if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report a status"
  return hs
end

if meta.generation ~= nil and status.observedGeneration ~= meta.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(meta.generation)
  return hs
end

local peerStatus = status.peerStatus
local ready = condition(status, "Ready")
local stalled = condition(status, "Stalled")
local stalledTrue = stalled ~= nil and stalled.status == "True"

if peerStatus == "error" or peerStatus == "timeout" or stalledTrue then
  hs.status = "Degraded"
  local fallback = "Peering failed"
  if peerStatus == "timeout" then
    fallback = "Peering timed out"
  end
  if stalledTrue then
    hs.message = message(stalled, message(ready, fallback))
  else
    hs.message = message(ready, message(stalled, fallback))
  end
  return hs
end

if peerStatus == "ready" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message(ready, "Peering is ready")
  return hs
end

hs.status = "Progressing"
local reconciling = condition(status, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = message(reconciling, message(ready, "Peering is being established"))
elseif peerStatus == "no_peers" then
  hs.message = message(ready, "Peering has not started yet")
else
  hs.message = message(ready, "Peering is being established")
end
return hs
