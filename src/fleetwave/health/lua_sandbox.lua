-- fleetwave health-check sandbox (Lua 5.4). Executed once per LuaRuntime with the host clock as `...`.
-- Returns run(src, obj, hostGetResource, maxTicks, deadline, repLimit, metrics) -> kind, value
-- (obj is nil for a metrics-only check; metrics maps query names to numbers, possibly empty).
-- kind: "ok" (value = result table) | "syntax" | "error" | "limit" (value = message).
local hostnow = ...
local load, pcall, error, type, pairs, ipairs, tostring, select = load, pcall, error, type, pairs, ipairs, tostring, select
local rawget, pack, unpack = rawget, table.pack, table.unpack
local sethook = debug.sethook
local ogsub, orep = string.gsub, string.rep

local TICK = 1000            -- instructions between hook calls
local PATTERN_COST = 1e9     -- rough bound on backtracking steps of one pattern match
local state = { reason = nil, repLimit = 0 }
local KILLED = {}            -- unique error value: cannot be forged by scripts

local function kill(reason)
  state.reason = reason
  error(KILLED, 0)
end

-- C functions cannot be interrupted by the count hook, so the costly ones are guarded up front.
-- They are patched on the real string table, which `s:find(...)` reaches through the metatable.
local function check_pattern(s, p)
  if type(s) == "string" and type(p) == "string" then
    local _, q = ogsub(ogsub(p, "%%.", ""), "[%*%+%-]", "")
    if q > 0 and (#s + 1) ^ (q + 1) > PATTERN_COST then
      error(("pattern %q with %d repetitions is too costly on a %d-byte string"):format(p, q, #s), 3)
    end
  end
end
for _, name in ipairs({ "find", "match", "gmatch", "gsub" }) do
  local f = string[name]
  string[name] = function(s, p, ...)
    if not (name == "find" and select(2, ...)) then check_pattern(s, p) end
    return f(s, p, ...)
  end
end
string.rep = function(s, n, sep)
  if type(n) == "number" and n > 0 then
    local size = (#tostring(s) + (sep ~= nil and #tostring(sep) or 0)) * n
    if size == 0 then return "" end -- n copies of "" would loop n times in C
    if size > state.repLimit then error(("string.rep result of %.0f bytes is too large"):format(size), 2) end
  end
  return orep(s, n, sep)
end

local function copy(t, drop)
  local c = {}
  for k, v in pairs(t) do if k ~= drop then c[k] = v end end
  return c
end

-- `("").dump` reaches the string library through the strings' metatable, not through the script's
-- env: that path must lead to the guarded functions without string.dump too.
getmetatable("").__index = copy(string, "dump")

local function safe_pcall(f, ...)
  local r = pack(pcall(f, ...))
  if state.reason then error(KILLED, 0) end -- a limit is not catchable
  return unpack(r, 1, r.n)
end

local function labels_of(obj, field, key)
  local m = type(obj) == "table" and obj.metadata
  local t = type(m) == "table" and m[field]
  if type(t) == "table" then return t[key] end
  return nil
end

local function new_env(obj, hostGet, metrics)
  local env = {
    obj = obj, metrics = copy(metrics),
    getResource = function(...)
      local ok, v = hostGet(...)
      if not ok then error(v, 2) end
      return v
    end,
    getLabel = function(o, k) return labels_of(o, "labels", k) end,
    getAnnotation = function(o, k) return labels_of(o, "annotations", k) end,
    string = copy(string, "dump"), table = copy(table, "move"), math = copy(math), utf8 = copy(utf8),
    pairs = pairs, ipairs = ipairs, next = next, type = type, tostring = tostring, tonumber = tonumber,
    select = select, error = error, assert = assert, pcall = safe_pcall,
    rawequal = rawequal, rawget = rawget, rawset = rawset, rawlen = rawlen, unpack = unpack,
  }
  env._G = env
  return env
end

local function run(src, obj, hostGet, maxTicks, deadline, repLimit, metrics)
  state.reason, state.repLimit = nil, repLimit
  local env = new_env(obj, hostGet, metrics)
  local chunk, err = load(src, "=script", "t", env)
  if not chunk then return "syntax", err end
  local ticks = 0
  sethook(function()
    if state.reason then return end
    ticks = ticks + 1
    if ticks > maxTicks then kill("instruction limit exceeded") end
    if ticks % 16 == 0 and hostnow() > deadline then kill("time limit exceeded") end
  end, "", TICK)
  local ok, res = pcall(function()
    chunk()
    local evaluate = rawget(env, "evaluate")
    if type(evaluate) ~= "function" then error("the script does not define function evaluate()", 0) end
    return evaluate(obj)
  end)
  sethook()
  if state.reason then return "limit", state.reason end
  if not ok then
    if type(res) ~= "string" then res = "error value of type " .. type(res) end
    return "error", res
  end
  if type(res) ~= "table" then return "error", "evaluate() returned a " .. type(res) .. ", not a table" end
  return "ok", res
end

for _, name in ipairs({ "io", "os", "require", "dofile", "loadfile", "load", "loadstring", "debug",
                        "package", "python", "collectgarbage", "coroutine", "print" }) do
  _G[name] = nil
end
return run
