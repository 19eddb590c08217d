-- wrk script of `make bench`: every wrk
-- thread gets its own room, so with -t16 -c16 each of the 16 keep-alive
-- connections runs `true` in its own room.
--
--   BENCH_TOKEN=<token> BENCH_ROOM_PREFIX=<p> wrk -t16 -c16 -d10s \
--       -s tools/bench/exec16.lua http://127.0.0.1:PORT
--
-- Rooms are <p>0 .. <p>15 (create them first so the run measures warm
-- execs).  done() prints "statuses: 200=N ..." and "bad_body=N" (answers
-- without "exitCode":0), next to wrk's own "Non-2xx or 3xx responses" line,
-- and the first few unexpected answers ("unexpected: <room> <status> <body>").

local token = os.getenv("BENCH_TOKEN") or ""
local prefix = os.getenv("BENCH_ROOM_PREFIX") or "bench-"
local threads = {}
local counter = 0

function setup(thread)
   thread:set("room", prefix .. counter)
   counter = counter + 1
   table.insert(threads, thread)
end

function init(args)
   statuses = {}
   bad_body = 0
   samples = {}
   req = wrk.format("POST", "/api/rooms/" .. room .. "/sandbox/exec",
                    { ["Authorization"] = "Bearer " .. token,
                      ["Content-Type"] = "application/json" },
                    '{"cmd":"true"}')
end

function request()
   return req
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   local bad = status ~= 200
   if not bad and not string.find(body, '"exitCode":0', 1, true) then
      bad_body = bad_body + 1
      bad = true
   end
   if bad and #samples < 3 then
      table.insert(samples, room .. " " .. status .. " " .. string.sub(body or "", 1, 300))
   end
end

function done(summary, latency, requests)
   local total, bad, shown = {}, 0, 0
   for _, t in ipairs(threads) do
      for _, line in ipairs(t:get("samples")) do
         if shown < 5 then
            io.write("unexpected: " .. line .. "\n")
            shown = shown + 1
         end
      end
      local s = t:get("statuses")
      for code, n in pairs(s) do
         total[code] = (total[code] or 0) + n
      end
      bad = bad + t:get("bad_body")
   end
   local parts = {}
   for code, n in pairs(total) do
      table.insert(parts, code .. "=" .. n)
   end
   table.sort(parts)
   io.write("statuses: " .. table.concat(parts, " ") .. "\n")
   io.write("bad_body=" .. bad .. "\n")
end
