-- Runs job_submit.lua outside slurmctld for contrib/slurm's Go tests:
--
--   lua harness.lua JOB_SUBMIT_LUA MODE < input > output
--
-- It stands in for the slurm table slurmctld gives the script. Text goes
-- in and out hex-encoded, one case per line, so that any byte (invalid
-- UTF-8, newlines, tabs) crosses intact. Modes:
--   tags      input: a comment; output: "ok" and the parsed tag, or "err",
--             the message and whether the comment has no tag at all
--   floats    input: a number (decimal); output: its canonical form
--   lower     no input; output: "R L" for each code point R the script
--             lowercases, to L
--   nonprint  no input; output: "LO HI" for each range of code points the
--             script escapes in messages
--   jobs      input: a Lua chunk returning a case (settings, job, partitions,
--             the uid of the user asking);
--             output: the return code, the messages to the user and the
--             fields the script set

local script, mode = arg[1], arg[2]

local user_msgs, logs = {}, {}
slurm = {
	SUCCESS = 0,
	ERROR = -1,
	log_user = function(fmt, ...)
		user_msgs[#user_msgs + 1] = string.format(fmt, ...)
	end,
	log_info = function(fmt, ...)
		logs[#logs + 1] = string.format(fmt, ...)
	end,
}
slurm.log_debug = slurm.log_info
slurm.log_error = slurm.log_info

local rc = dofile(script)
assert(rc == slurm.SUCCESS, "the script returned " .. tostring(rc) .. " when loaded")
local lib = gavel_job_submit

local function hex(s)
	return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
	return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

local function num(n)
	return string.format("%.0f", n or 0)
end

local load_chunk = loadstring or load

-- The settings as the file has them, restored before each job case.
local defaults = {}
for k, v in pairs(lib.settings) do
	defaults[k] = v
end

-- job_table mimics the tables slurmctld passes: reads see the job's
-- fields, writes are recorded.
local function job_table(fields, writes)
	return setmetatable({}, {
		__index = function(_, k) return fields[k] end,
		__newindex = function(_, k, v)
			fields[k] = v
			if writes then
				writes[#writes + 1] = k .. "=" .. tostring(v)
			end
		end,
	})
end

if mode == "tags" then
	for line in io.lines() do
		local tag, err, no_tag = lib.parse_tag(unhex(line))
		if tag then
			io.write("ok\t", hex(lib.format_tag(tag)), "\t", hex(tag.model or ""), "\t", num(tag.steps), "\t",
				string.format("%.17g", tag.weight or 0), "\t", num(tag.slo), "\t", hex(tag.entity or ""), "\t",
				tag.class or "", "\t", num(tag.grace), "\t", tag.preempt or "", "\t",
				tag.mixed or "", "\t", num(tag.restart), "\t", tag.share or "", "\n")
		else
			io.write("err\t", hex(err), "\t", no_tag and "1" or "0", "\n")
		end
	end
elseif mode == "floats" then
	for line in io.lines() do
		io.write(lib.format_float(tonumber(line)), "\n")
	end
elseif mode == "lower" then
	for r = 0x80, 0x10FFFF do
		local l = lib.lower_rune(r)
		if l ~= r then
			io.write(num(r), " ", num(l), "\n")
		end
	end
elseif mode == "nonprint" then
	local lo
	for r = 0x80, 0x110000 do
		local np = r <= 0x10FFFF and not (r >= 0xD800 and r <= 0xDFFF) and not lib.is_print(r)
		if np and not lo then
			lo = r
		elseif not np and lo then
			io.write(num(lo), " ", num(r - 1), "\n")
			lo = nil
		end
	end
elseif mode == "jobs" then
	for line in io.lines() do
		local case = assert(load_chunk(unhex(line)))()
		for k, v in pairs(defaults) do
			lib.settings[k] = v
		end
		for k, v in pairs(case.settings or {}) do
			lib.settings[k] = v
		end
		user_msgs, logs = {}, {}
		local writes = {}
		local parts = {}
		for name, fields in pairs(case.part_list or {}) do
			parts[name] = job_table(fields)
		end
		local got, uid = nil, case.uid or 1000
		if case.job_rec then
			got = slurm_job_modify(job_table(case.job_desc, writes), job_table(case.job_rec), parts, uid)
		else
			got = slurm_job_submit(job_table(case.job_desc, writes), parts, uid)
		end
		io.write(tostring(got), "\t", hex(table.concat(user_msgs, "\n")), "\t", hex(table.concat(writes, "\n")), "\n")
	end
else
	error("unknown mode " .. tostring(mode))
end
