-- wrk script for bench/load/wrk.py (each job posts one prepared batch a second) and
-- bench/load/ranks.py (the ranks of one job, each a beat and a batch every few seconds).
--
-- The requests are prepared by the Python driver, one per line of the file named by the first
-- script argument: "<path>\t<body>", every job's batches in order (job 0 second 0, job 1
-- second 0, ..., job 0 second 1, ...). Nothing is built here while the load runs: a request is
-- picked, wrk sends it, and `delay()` holds the connection until the next request is due.
-- Request k of the whole load is due at start + k / rate seconds (the third script argument:
-- wrk.py gives one request per job a second, its job count), so the connections together offer
-- `rate` requests a second whatever the service's latency, each connection at its own phase; a
-- connection whose answer came late sends at once (no wait) until it is on time.
-- wrk runs one thread (`-t 1`), so every connection shares this state and the line order
-- keeps each job's steps in order.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } holter_timespec;
int clock_gettime(int clk_id, holter_timespec *tp);
]]
local ts = ffi.new("holter_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local requests = {}
local rate = 0 -- requests a second, all connections together
local next_request = 0 -- index of the next request to hand out
local next_slot = 0 -- index of the next due time to hand out
local started = nil
-- globals, so that done() reads them through thread:get; `sent` counts the requests handed to
-- wrk (those unanswered when its time ran out among them), `received` and `stored` add up the
-- counts of Holter's answers to points batches (zero for any other answer)
answered, failed, overrun, sent, received, stored = 0, 0, 0, 0, 0, 0

function init(args)
  local path = args[1]
  local method = args[2] or "POST"
  rate = tonumber(args[3])
  local headers = { ["Content-Type"] = "application/json" }
  for line in io.lines(path) do
    local tab = line:find("\t", 1, true)
    requests[#requests + 1] = wrk.format(method, line:sub(1, tab - 1), headers, line:sub(tab + 1))
  end
end

function delay()
  local now = now_ms()
  if started == nil then
    started = now
  end
  -- the first slots spread the connections over their phases; after that `rate` requests a second
  local due = started + next_slot * 1000 / rate
  next_slot = next_slot + 1
  local wait = due - now
  if wait < 0 then
    return 0
  end
  return wait
end

function request()
  next_request = next_request + 1
  sent = sent + 1
  if next_request > #requests then
    -- the prepared seconds ran out (wrk ran longer than asked): send the last one again (the
    -- service stores its points once) and say so at the end
    overrun = overrun + 1
    return requests[#requests]
  end
  return requests[next_request]
end

function response(status, headers, body)
  if status == 200 then
    answered = answered + 1
    local got, new = body:match('"received":(%d+),"stored":(%d+)')
    if got then
      received = received + tonumber(got)
      stored = stored + tonumber(new)
    end
  else
    failed = failed + 1
  end
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function done(summary, latency, requests_)
  local ok, bad, over, out, got, new = 0, 0, 0, 0, 0, 0
  for _, thread in ipairs(threads) do
    ok = ok + (thread:get("answered") or 0)
    bad = bad + (thread:get("failed") or 0)
    over = over + (thread:get("overrun") or 0)
    out = out + (thread:get("sent") or 0)
    got = got + (thread:get("received") or 0)
    new = new + (thread:get("stored") or 0)
  end
  io.write(string.format(
    '{"requests": %d, "ok": %d, "failed": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, '
      .. '"status_errors": %d, "timeouts": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
      .. '"max_us": %d, "overrun": %d, "sent": %d, "received": %d, "stored": %d}\n',
    summary.requests, ok, bad, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout, summary.duration, latency:percentile(50),
    latency:percentile(95), latency:percentile(99), latency.max, over, out, got, new
  ))
end
