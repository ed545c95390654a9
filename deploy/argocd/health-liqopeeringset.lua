-- Argo CD health check for peering.liqo-operator.io/LiqoPeeringSet.
-- Argo CD runs it with gopher-lua (Lua 5.1): `obj` is the live object, the result a {status, message}
-- table. Install it with argocd-cm-snippet.yaml.
--
--   deleting (metadata.deletionTimestamp)               -> Progressing (its LiqoPeerings unpeer first)
--   no status yet, or status.observedGeneration stale   -> Progressing
--   condition Stalled=True (a LiqoPeering failed)       -> Degraded, with the Stalled message
--   condition Ready=True (every LiqoPeering ready)      -> Healthy
--   anything else (establishing, waiting, removing)     -> Progressing

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
  hs.message = "LiqoPeeringSet is being deleted: its LiqoPeerings are unpeered or released first"
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

local ready = condition(status, "Ready")
local stalled = condition(status, "Stalled")

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = message(stalled, message(ready, "A LiqoPeering of the set failed"))
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message(ready, "Every LiqoPeering is ready")
  return hs
end

hs.status = "Progressing"
hs.message = message(condition(status, "Reconciling"), message(ready, "LiqoPeerings are being established"))
return hs
