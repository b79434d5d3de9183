-- job_submit.lua: gavel-slurm's script for Slurm's job_submit/lua plugin.
--
-- gavel-slurm reads the scheduling hints of a job from a "gavel:" tag in
-- its --comment. A mistyped tag does not stop Slurm from running the job,
-- so without this script the user finds out only later, from
-- `gavel-slurm status`, that the job runs unmanaged. With it, in the
-- partitions listed below:
--   * a job whose tag does not parse is refused at submission (and a
--     comment update that breaks the tag is refused), with the message
--     the daemon's status would show: "not managed: <why>";
--   * a job with a valid tag is made requeueable (the daemon preempts by
--     requeueing, which Slurm refuses for --no-requeue jobs) and its tag,
--     in canonical form, is copied to the AdminComment, which users
--     cannot change, so admins see what the daemon reads (as submitted:
--     see slurm_job_modify);
--   * optionally (off by default), a typed GPU request is made untyped
--     plus a constraint, so that the daemon may move the job to another
--     GPU type.
-- Jobs without a tag, and jobs in other partitions, are left alone.
--
-- The tag grammar is the daemon's own (bridge.ParseTag): both parsers are
-- tested against one table of valid and invalid tags
-- (contrib/slurm/testdata/tags.json). When they disagree, the daemon wins;
-- report it.
--
-- Install: copy this file next to slurm.conf (as job_submit.lua), edit the
-- settings below and add
--     JobSubmitPlugins=lua
-- to slurm.conf, then `scontrol reconfigure`. slurmctld reloads the script
-- by itself whenever the file changes. Works with Lua 5.1 to 5.4 (Debian's
-- Slurm links Lua 5.1, Enterprise Linux's 5.3).

------------------------------------------------------------ site settings

local settings = {
	-- Partitions whose jobs gavel-slurm schedules: keep this in step with
	-- slurm.partitions in /etc/gavel-slurm/gavel-slurm.toml. An empty list
	-- means every partition, as it does for the daemon.
	partitions = { "gpu" },

	-- Make jobs with a valid tag requeueable (--requeue).
	requeue = true,

	-- Refuse jobs without a gavel: tag in the scheduled partitions. The
	-- daemon leaves untagged jobs to Slurm: it never holds them, so they
	-- take any GPU that frees up between rounds ahead of the jobs it
	-- schedules. Sites that want every GPU job scheduled set this.
	require_tag = false,

	-- Copy the checked tag, in canonical form, to the AdminComment. Text
	-- already there stays, before the tag.
	admin_comment = true,

	-- Rewrite a request for one GPU type (--gres=gpu:v100:2, --gpus=v100:2)
	-- into an untyped one plus that type as a --constraint feature, so that
	-- the daemon may place the job on any type. Only the types listed in
	-- gpu_types are rewritten (they must be node features, as the daemon
	-- needs anyway); requests that name several types, or a constraint
	-- with operators other than &, are left as they are.
	untype_gpu_requests = false,
	gpu_types = { "k80", "p100", "v100" },

	-- The daemon keeps the jobs it does not start yet waiting on its
	-- lease job (--dependency=afterany:LEASE), which runs out by itself
	-- if the daemon stops. The owner of a managed job may not drop an
	-- afterany: dependency the job has: it would start the job ahead of
	-- the allocation. root and these users (the daemon's slurm.user,
	-- whose token sends its updates) may. Names are looked up in
	-- /etc/passwd when the script loads; list uids in daemon_uids where
	-- users come from elsewhere (LDAP).
	daemon_users = { "slurm" },
	daemon_uids = {},
}

------------------------------------------------------------ text helpers
-- The daemon is written in Go: its messages quote text the way Go's %q
-- does and it lowercases keys with Go's Unicode case mapping. The helpers
-- below reproduce what the parser and its messages need, byte for byte.

local function ascii_lower(s)
	-- Not string.lower: it follows the C locale, which may map bytes
	-- above 127 (and 'I' in a Turkish locale).
	return (s:gsub("[A-Z]", function(c) return string.char(c:byte() + 32) end))
end

-- decode returns the code point that starts at byte i of s and its length
-- in bytes, or nil and 1 when the byte does not start valid UTF-8 (as Go
-- decides it: no overlong forms, no surrogates, nothing above U+10FFFF).
local function decode(s, i)
	local c = s:byte(i)
	if c < 0x80 then
		return c, 1
	end
	local n, r
	if c >= 0xC2 and c <= 0xDF then
		n, r = 2, c - 0xC0
	elseif c >= 0xE0 and c <= 0xEF then
		n, r = 3, c - 0xE0
	elseif c >= 0xF0 and c <= 0xF4 then
		n, r = 4, c - 0xF0
	else
		return nil, 1
	end
	-- The range of the second byte depends on the first one.
	local lo, hi = 0x80, 0xBF
	if c == 0xE0 then
		lo = 0xA0
	elseif c == 0xED then
		hi = 0x9F
	elseif c == 0xF0 then
		lo = 0x90
	elseif c == 0xF4 then
		hi = 0x8F
	end
	for k = 1, n - 1 do
		local b = s:byte(i + k)
		if k > 1 then
			lo, hi = 0x80, 0xBF
		end
		if not b or b < lo or b > hi then
			return nil, 1
		end
		r = r * 64 + (b - 0x80)
	end
	return r, n
end

local function encode(r)
	if r < 0x80 then
		return string.char(r)
	elseif r < 0x800 then
		return string.char(0xC0 + math.floor(r / 64), 0x80 + r % 64)
	elseif r < 0x10000 then
		return string.char(0xE0 + math.floor(r / 4096), 0x80 + math.floor(r / 64) % 64, 0x80 + r % 64)
	end
	return string.char(0xF0 + math.floor(r / 262144), 0x80 + math.floor(r / 4096) % 64,
		0x80 + math.floor(r / 64) % 64, 0x80 + r % 64)
end

-- lower_rune maps a code point to lower case as Go's unicode.ToLower does
-- for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic, plus the three
-- letters elsewhere that lower to text the parser reads: KELVIN SIGN
-- lowers to "k" and LATIN CAPITAL LETTER I WITH DOT ABOVE to "i" (so
-- "CHECKPOİNT" is a valid preempt= value for the daemon), GREEK CAPITAL
-- MU to the "μ" of "μs". Other letters are kept as typed: that changes only
-- how a refused key is quoted in a message, never a decision.
local function lower_rune(r)
	if r < 0x80 then
		if r >= 65 and r <= 90 then
			return r + 32
		end
		return r
	elseif r >= 0xC0 and r <= 0xDE and r ~= 0xD7 then
		return r + 32
	elseif r == 0x130 then
		return 0x69
	elseif r == 0x178 then
		return 0xFF
	elseif (r >= 0x100 and r <= 0x12F) or (r >= 0x132 and r <= 0x137) or (r >= 0x14A and r <= 0x177) then
		if r % 2 == 0 then
			return r + 1
		end
	elseif (r >= 0x139 and r <= 0x148) or (r >= 0x179 and r <= 0x17E) then
		if r % 2 == 1 then
			return r + 1
		end
	elseif r == 0x370 or r == 0x372 or r == 0x376 or r == 0x3FA or r == 0x3F7 then
		return r + 1
	elseif r == 0x37F then
		return 0x3F3
	elseif r == 0x386 then
		return 0x3AC
	elseif r >= 0x388 and r <= 0x38A then
		return r + 37
	elseif r == 0x38C then
		return 0x3CC
	elseif r == 0x38E or r == 0x38F then
		return r + 63
	elseif (r >= 0x391 and r <= 0x3A1) or (r >= 0x3A3 and r <= 0x3AB) then
		return r + 32
	elseif r == 0x3CF then
		return 0x3D7
	elseif r >= 0x3D8 and r <= 0x3EF then
		if r % 2 == 0 then
			return r + 1
		end
	elseif r == 0x3F4 then
		return 0x3B8
	elseif r == 0x3F9 then
		return 0x3F2
	elseif r >= 0x3FD and r <= 0x3FF then
		return r - 130
	elseif r >= 0x400 and r <= 0x40F then
		return r + 80
	elseif r >= 0x410 and r <= 0x42F then
		return r + 32
	elseif (r >= 0x460 and r <= 0x481) or (r >= 0x48A and r <= 0x4BF) or (r >= 0x4D0 and r <= 0x52F) then
		if r % 2 == 0 then
			return r + 1
		end
	elseif r == 0x4C0 then
		return 0x4CF
	elseif r >= 0x4C1 and r <= 0x4CE then
		if r % 2 == 1 then
			return r + 1
		end
	elseif r == 0x2126 then
		return 0x3C9
	elseif r == 0x212A then
		return 0x6B
	elseif r == 0x212B then
		return 0xE5
	end
	return r
end

-- go_lower is Go's strings.ToLower: bytes that are not valid UTF-8 become
-- U+FFFD when the text is not plain ASCII.
local function go_lower(s)
	if not s:find("[\128-\255]") then
		return ascii_lower(s)
	end
	local out, i = {}, 1
	while i <= #s do
		local r, n = decode(s, i)
		if r == nil then
			out[#out + 1] = "\239\191\189"
		else
			out[#out + 1] = encode(lower_rune(r))
		end
		i = i + n
	end
	return table.concat(out)
end

-- Assigned code points above U+007F that Go's strconv.IsPrint refuses
-- (C1 controls, spaces other than U+0020, format characters, private use),
-- from Go's Unicode 15 tables. Go also escapes unassigned code points; this
-- script shows them as typed, which changes only a message.
local NON_PRINT = {
	0x0080, 0x00A0, 0x00AD, 0x00AD, 0x0600, 0x0605, 0x061C, 0x061C,
	0x06DD, 0x06DD, 0x070F, 0x070F, 0x0890, 0x0891, 0x08E2, 0x08E2,
	0x1680, 0x1680, 0x180E, 0x180E, 0x2000, 0x200F, 0x2028, 0x202F,
	0x205F, 0x2064, 0x2066, 0x206F, 0x3000, 0x3000, 0xE000, 0xF8FF,
	0xFEFF, 0xFEFF, 0xFFF9, 0xFFFB, 0x110BD, 0x110BD, 0x110CD, 0x110CD,
	0x13430, 0x1343F, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, 0xE0001, 0xE0001,
	0xE0020, 0xE007F, 0xF0000, 0xFFFFD, 0x100000, 0x10FFFD,
}

local function is_print(r)
	if r < 0x80 then
		return r >= 0x20 and r < 0x7F
	end
	for k = 1, #NON_PRINT, 2 do
		if r < NON_PRINT[k] then
			return true
		elseif r <= NON_PRINT[k + 1] then
			return false
		end
	end
	return true
end

local ESCAPES = { [7] = "\\a", [8] = "\\b", [9] = "\\t", [10] = "\\n", [11] = "\\v", [12] = "\\f", [13] = "\\r" }

-- go_quote writes s as Go's %q (strconv.Quote) does.
local function go_quote(s)
	local out, i = { '"' }, 1
	while i <= #s do
		local r, n = decode(s, i)
		local piece
		if r == nil then
			piece = string.format("\\x%02x", s:byte(i))
		elseif r == 34 then
			piece = '\\"'
		elseif r == 92 then
			piece = "\\\\"
		elseif is_print(r) then
			piece = s:sub(i, i + n - 1)
		elseif r < 0x80 then
			piece = ESCAPES[r] or string.format("\\x%02x", r)
		elseif r < 0x10000 then
			piece = string.format("\\u%04x", r)
		else
			piece = string.format("\\U%08x", r)
		end
		out[#out + 1] = piece
		i = i + n
	end
	out[#out + 1] = '"'
	return table.concat(out)
end

-- Go's unicode.IsSpace, for strings.TrimSpace.
local function is_space(r)
	return r == 32 or (r >= 9 and r <= 13) or r == 0x85 or r == 0xA0 or r == 0x1680
		or (r >= 0x2000 and r <= 0x200A) or r == 0x2028 or r == 0x2029 or r == 0x202F
		or r == 0x205F or r == 0x3000
end

local function trim_space(s)
	local first, last, i = nil, nil, 1
	while i <= #s do
		local r, n = decode(s, i)
		if not (r and is_space(r)) then
			first = first or i
			last = i + n - 1
		end
		i = i + n
	end
	if not first then
		return ""
	end
	return s:sub(first, last)
end

-- check_text refuses what could change how a line showing the value
-- looks: invalid UTF-8, control characters, bidirectional-text controls
-- and the Unicode line and paragraph separators.
-- check_visible refuses, in a name, characters that do not show (format
-- characters, private use, spaces other than U+0020): a name that shows
-- as another's.
local function check_visible(s)
	local i = 1
	while i <= #s do
		local r, n = decode(s, i)
		if r ~= 32 and not is_print(r) then
			return string.format("contains the invisible character U+%04X; names must be printable text", r)
		end
		i = i + n
	end
	return nil
end

local function check_text(s)
	local i = 1
	while i <= #s do
		local r, n = decode(s, i)
		if r == nil then
			return "is not valid UTF-8"
		end
		i = i + n
	end
	i = 1
	while i <= #s do
		local r, n = decode(s, i)
		if r < 0x20 or (r >= 0x7F and r <= 0x9F) then
			return string.format("contains the control character U+%04X; values must be printable text", r)
		elseif r == 0x61C or r == 0x200E or r == 0x200F or (r >= 0x202A and r <= 0x202E)
			or (r >= 0x2066 and r <= 0x2069) then
			return string.format("contains the bidirectional-text control U+%04X; values must be printable text", r)
		elseif r == 0x2028 or r == 0x2029 then
			return string.format("contains the line separator U+%04X; values must be printable text", r)
		end
		i = i + n
	end
	return nil
end

------------------------------------------------------------ exact decimals
-- Durations are summed exactly in nanoseconds, as the daemon does with
-- big rationals: Lua 5.1 has only doubles, which cannot hold ten years in
-- nanoseconds. A non-negative decimal is a digit string d and a count f of
-- its digits after the point.

local function strip_zeros(d)
	d = d:gsub("^0+", "")
	if d == "" then
		return "0"
	end
	return d
end

-- cmp_int compares two non-negative integers written in digits.
local function cmp_int(a, b)
	a, b = strip_zeros(a), strip_zeros(b)
	if #a ~= #b then
		return #a < #b and -1 or 1
	elseif a == b then
		return 0
	end
	return a < b and -1 or 1
end

local function add_digits(a, b)
	if #a < #b then
		a, b = b, a
	end
	b = string.rep("0", #a - #b) .. b
	local out, carry = {}, 0
	for k = #a, 1, -1 do
		local v = a:byte(k) + b:byte(k) - 96 + carry
		carry = 0
		if v >= 10 then
			v, carry = v - 10, 1
		end
		out[k] = string.char(48 + v)
	end
	local s = table.concat(out)
	if carry == 1 then
		s = "1" .. s
	end
	return s
end

local function mul_digits(a, m)
	local out, carry = {}, 0
	for k = #a, 1, -1 do
		local v = (a:byte(k) - 48) * m + carry
		local digit = v % 10
		out[k] = string.char(48 + digit)
		carry = math.floor(v / 10)
	end
	local s = table.concat(out)
	if carry > 0 then
		s = string.format("%d", carry) .. s
	end
	return s
end

-- sub_one subtracts one from a positive integer written in digits,
-- keeping its length.
local function sub_one(a)
	local out, k = {}, #a
	while a:byte(k) == 48 do
		out[k] = "9"
		k = k - 1
	end
	out[k] = string.char(a:byte(k) - 1)
	return a:sub(1, k - 1) .. table.concat(out, "", k, #a)
end

local function add_decimals(d1, f1, d2, f2)
	if f1 < f2 then
		d1, f1, d2, f2 = d2, f2, d1, f1
	end
	return add_digits(d1, d2 .. string.rep("0", f1 - f2)), f1
end

-- split_decimal returns the integer and fraction digits of d / 10^f.
local function split_decimal(d, f)
	if #d <= f then
		d = string.rep("0", f - #d + 1) .. d
	end
	return d:sub(1, #d - f), d:sub(#d - f + 1)
end

------------------------------------------------------------ durations
-- As internal/duration: bare seconds, number+unit groups, Slurm's forms.

local MAX_SECONDS = 3650 * 86400
local MAX_NS = "315360000000000000"
local SYNTAX_HINT = "is not a duration (use seconds, units s, m, h, d, w as in 90m, 12h or 1h30m, " ..
	"or Slurm's [D-]HH:MM:SS)"

-- Each unit is m * 10^e nanoseconds: the digits are multiplied by a small
-- number and the decimal point moves.
local UNITS = {
	ns = { 1, 0 }, us = { 1, 3 }, ["\194\181s"] = { 1, 3 }, ["\206\188s"] = { 1, 3 },
	ms = { 1, 6 }, s = { 1, 9 }, m = { 6, 10 }, h = { 36, 11 }, d = { 864, 11 }, w = { 6048, 11 },
}

local INFINITE = { inf = true, infinity = true, nan = true, infinite = true, unlimited = true }

local function count_dots(s)
	return select(2, s:gsub("%.", ""))
end

-- parse_units returns the sum of the groups in nanoseconds as digits and
-- a fraction length, or nil.
local function parse_units(s)
	local total_d, total_f, rest = "0", 0, s
	while rest ~= "" do
		local num = rest:match("^[0-9.]*")
		if num == "" or num == "." or count_dots(num) > 1 then
			return nil
		end
		rest = rest:sub(#num + 1)
		local unit = rest:match("^[^0-9.]*")
		local u
		if unit == "" then
			-- A bare number must stand alone: "1h30" is more likely a
			-- mistake for 1h30m than 1h and 30 seconds.
			if total_d:find("[1-9]") or #num ~= #s then
				return nil
			end
			u = UNITS.s
		else
			u = UNITS[go_lower(unit)]
			if not u then
				return nil
			end
			rest = rest:sub(#unit + 1)
		end
		local ip, fp = num:match("^([0-9]*)%.?([0-9]*)$")
		local d, f = mul_digits(ip .. fp, u[1]), #fp - u[2]
		if f < 0 then
			d, f = d .. string.rep("0", -f), 0
		end
		total_d, total_f = add_decimals(total_d, total_f, d, f)
	end
	return total_d, total_f
end

-- field reads one all-digit field of a Slurm time, below limit if given.
local function field(s, limit)
	if s == nil or s == "" or #s > 9 or s:find("[^0-9]") then
		return nil
	end
	local n = tonumber(s)
	if limit and n >= limit then
		return nil
	end
	return n
end

local function split(s, sep)
	local parts, start = {}, 1
	while true do
		local i = s:find(sep, start, true)
		if not i then
			parts[#parts + 1] = s:sub(start)
			return parts
		end
		parts[#parts + 1] = s:sub(start, i - 1)
		start = i + 1
	end
end

-- parse_slurm reads MM:SS, HH:MM:SS, D-HH, D-HH:MM and D-HH:MM:SS in
-- seconds: the leading field may be any size, the others must be in range.
local function parse_slurm(s)
	local days, clock = 0, s
	local dash = s:find("-", 1, true)
	if dash then
		days = field(s:sub(1, dash - 1))
		if not days then
			return nil
		end
		clock = s:sub(dash + 1)
	end
	local p = split(clock, ":")
	local h, m, sec = 0, 0, 0
	if dash and #p <= 3 then
		h = field(p[1], 24)
		if #p > 1 then
			m = field(p[2], 60)
		end
		if #p > 2 then
			sec = field(p[3], 60)
		end
	elseif not dash and #p == 2 then
		m, sec = field(p[1]), field(p[2], 60)
	elseif not dash and #p == 3 then
		h, m, sec = field(p[1]), field(p[2], 60), field(p[3], 60)
	else
		return nil
	end
	if not (h and m and sec) then
		return nil
	end
	return days * 86400 + h * 3600 + m * 60 + sec
end

-- parse_duration returns whole seconds, rounded as the daemon rounds:
-- first to the nanosecond (halves up), then to the second (halves up).
local function parse_duration(s)
	local function fail(reason)
		return nil, reason .. ": " .. go_quote(s)
	end
	local text = trim_space(s)
	if text == "" then
		return fail("is empty")
	elseif #text > 64 then
		return fail("is too long to be a duration (over 64 characters)")
	elseif text:sub(1, 1) == "-" then
		return fail("is negative")
	end
	local bare = text
	if bare:sub(1, 1) == "+" then
		bare = bare:sub(2)
	end
	if INFINITE[go_lower(bare)] then
		return fail("is not a finite duration")
	end
	if text:find("[:%-]") then
		local secs = parse_slurm(text)
		if not secs then
			return fail(SYNTAX_HINT)
		elseif secs > MAX_SECONDS then
			return fail("is longer than 3650 days")
		end
		return secs
	end
	local d, f = parse_units(text)
	if not d then
		return fail(SYNTAX_HINT)
	end
	local ns, frac = split_decimal(d, f)
	local c = cmp_int(ns, MAX_NS)
	if c > 0 or (c == 0 and frac:find("[1-9]")) then
		return fail("is longer than 3650 days")
	end
	if frac:byte(1) and frac:byte(1) >= 53 then
		ns = add_digits(ns, "1")
	end
	ns = strip_zeros(ns)
	local secs, rest = "0", ns
	if #ns > 9 then
		secs, rest = ns:sub(1, -10), ns:sub(-9)
	end
	local n = tonumber(secs)
	if tonumber(rest) >= 500000000 then
		n = n + 1
	end
	return n
end

------------------------------------------------------------ numbers

-- parse_decimal reads [+-]digits[.digits][e[+-]digits] as the daemon
-- does (at most 40 characters, exponent within ±20) and returns the sign,
-- the digits and the power of ten they are multiplied by, or nil.
local function parse_decimal(s)
	if s == "" or #s > 40 or s:find("[\128-\255]") then
		return nil
	end
	local low = ascii_lower(s)
	local mant, exp = low, 0
	local e = low:find("e", 1, true)
	if e then
		mant = low:sub(1, e - 1)
		local sign, digits = low:sub(e + 1):match("^([+-]?)([0-9]+)$")
		if not digits then
			return nil
		end
		digits = strip_zeros(digits)
		if #digits > 2 or tonumber(digits) > 20 then
			return nil
		end
		exp = tonumber(digits)
		if sign == "-" then
			exp = -exp
		end
	end
	local sign, body = mant:match("^([+-]?)(.*)$")
	if not body:find("^[0-9.]*$") or not body:find("[0-9]") or count_dots(body) > 1 then
		return nil
	end
	local ip, fp = body:match("^([0-9]*)%.?([0-9]*)$")
	return { neg = sign == "-", d = ip .. fp, e = exp - #fp }
end

local STEP_SUFFIXES = { k = 3, K = 3, m = 6, M = 6, g = 9, G = 9, b = 9, B = 9 }

-- parse_steps reads 250000, 250_000, 250k, 1.5M or 1e6 exactly and
-- requires a whole number between 1 and 1e15.
local function parse_steps(s)
	local num = s:gsub("_", "")
	local scale = STEP_SUFFIXES[num:sub(-1)]
	if scale then
		num = num:sub(1, -2)
	end
	local x = parse_decimal(num)
	if not x then
		return nil, "is not a number: " .. go_quote(s)
	end
	local d, e = x.d:gsub("^0+", ""), x.e + (scale or 0)
	local range = "must be between 1 and 1e+15: " .. go_quote(s)
	if d == "" then
		return nil, range
	end
	local trimmed = d:gsub("0+$", "")
	e = e + #d - #trimmed
	d = trimmed
	if e < 0 then
		return nil, "is not a whole number of steps: " .. go_quote(s)
	elseif x.neg or #d + e > 16 or (#d + e == 16 and d ~= "1") then
		return nil, range
	end
	return tonumber(d .. string.rep("0", e))
end

-- parse_weight gives the double nearest to the decimal, as Go's
-- big.Rat.Float64 does (strtod rounds correctly too).
local function parse_weight(s)
	local x = parse_decimal(s)
	if not x then
		return nil, "is not a number: " .. go_quote(s)
	end
	local w = tonumber(x.d .. "e" .. x.e)
	if x.neg then
		w = -w
	end
	if not (w >= 1e-6 and w <= 1e6) then
		return nil, "must be between 1e-06 and 1e+06: " .. go_quote(s)
	end
	return w
end

local function parse_class(s)
	local l = go_lower(s)
	if l == "te" or l == "trial-and-error" then
		return "te"
	elseif l == "be" or l == "best-effort" then
		return "be"
	end
	return nil, "must be te (trial-and-error) or be (best-effort): " .. go_quote(s)
end

local function parse_preempt(s)
	local l = go_lower(s)
	if l == "checkpoint" or l == "requeue" or l == "never" then
		return l
	end
	return nil, "must be checkpoint, requeue or never: " .. go_quote(s)
end

local function parse_mixed(s)
	local l = go_lower(s)
	if l == "ok" or l == "no" then
		return l
	end
	return nil, "must be ok or no: " .. go_quote(s)
end

------------------------------------------------------------ the tag

local PREFIX = "gavel:"

local function is_word_byte(b)
	return b == 95 or b == 45 or (b >= 48 and b <= 57) or (b >= 97 and b <= 122) or (b >= 65 and b <= 90)
end

local function is_separator(b)
	return b == 32 or b == 44 or b == 9 or b == 10 or b == 13
end

local function is_key(s)
	for k = 1, #s do
		if not is_word_byte(s:byte(k)) then
			return false
		end
	end
	return true
end

-- find_tag returns where the prefix starts a word (so "nogavel:" is not a
-- tag), comparing ASCII letters without case, or nil.
local function find_tag(s)
	for i = 1, #s - #PREFIX + 1 do
		if ascii_lower(s:sub(i, i + #PREFIX - 1)) == PREFIX and (i == 1 or not is_word_byte(s:byte(i - 1))) then
			return i
		end
	end
	return nil
end

-- read_value reads a bare, 'single' (literal) or "double" (\" and \\
-- escapes) quoted value at byte i and returns it with the index past it,
-- or nil and a message.
local function read_value(s, i)
	local c = s:byte(i)
	if c == 39 then
		local j = s:find("'", i + 1, true)
		if not j then
			return nil, "has an unterminated ' quote"
		end
		return s:sub(i + 1, j - 1), j + 1
	elseif c == 34 then
		local out, j = {}, i + 1
		while j <= #s do
			local b = s:byte(j)
			if b == 92 then
				local nb = s:byte(j + 1)
				if nb == 34 or nb == 92 then
					j = j + 1
				end
				out[#out + 1] = s:sub(j, j)
			elseif b == 34 then
				return table.concat(out), j + 1
			else
				out[#out + 1] = s:sub(j, j)
			end
			j = j + 1
		end
		return nil, 'has an unterminated " quote'
	end
	local j = i
	while j <= #s do
		local b = s:byte(j)
		if is_separator(b) or b == 59 then
			break
		elseif b == 34 or b == 39 then
			return nil, "has a quote inside an unquoted value"
		end
		j = j + 1
	end
	return s:sub(i, j - 1), j
end

-- split_pairs reads key=value pairs up to the end of body or a ';' and
-- returns them with the text after the ';', or nil, nil and a message.
local function split_pairs(body)
	local list, i, n = {}, 1, #body
	while true do
		while i <= n and is_separator(body:byte(i)) do
			i = i + 1
		end
		if i > n then
			return list, ""
		elseif body:byte(i) == 59 then
			return list, body:sub(i + 1)
		end
		local start = i
		while i <= n do
			local b = body:byte(i)
			if b == 61 or b == 59 or is_separator(b) then
				break
			end
			i = i + 1
		end
		local raw = body:sub(start, i - 1)
		local key = go_lower(raw)
		if i > n or body:byte(i) ~= 61 then
			return nil, nil, "expected key=value in gavel: tag, got " .. go_quote(raw)
		elseif key == "" then
			return nil, nil, "missing key before = in gavel: tag"
		elseif not is_key(key) then
			return nil, nil, "key " .. go_quote(key) .. " is not a word of letters, digits, '_' and '-'"
		end
		local value, next_or_err = read_value(body, i + 1)
		if value == nil then
			return nil, nil, key .. "= " .. next_or_err
		end
		list[#list + 1] = { key = key, value = value }
		i = next_or_err
		if i <= n then
			local b = body:byte(i)
			if not is_separator(b) and b ~= 59 then
				return nil, nil, key .. "= value must be followed by a space, comma or ';'"
			end
		end
	end
end

local PARSERS = {
	steps = parse_steps, weight = parse_weight, slo = parse_duration, grace = parse_duration,
	class = parse_class, preempt = parse_preempt, mixed = parse_mixed, restart = parse_duration,
	share = parse_mixed, -- ok or no, as mixed=
}

local function set(tag, key, value)
	if value == "" then
		return key .. "= is empty"
	end
	local err = check_text(value)
	if err then
		return key .. "= " .. err
	end
	local v
	if key == "model" or key == "entity" then
		v, err = value, check_visible(value)
	elseif PARSERS[key] then
		v, err = PARSERS[key](value)
		if key == "slo" and v == 0 then
			err = "must be longer than 0"
		end
	else
		return "unknown key " .. key .. "= (known: model, steps, weight, slo, entity, class, grace, preempt, mixed, restart, share)"
	end
	if err then
		return key .. "= " .. err
	end
	if v ~= 0 then -- grace=0 and restart=0 leave it unset, as in the daemon
		tag[key] = v
	end
	return nil
end

-- parse_tag finds the gavel: tag in a comment and parses it. It returns the
-- tag (a table of the keys that were set; durations in seconds), or nil, a
-- message, and true when the comment simply holds no tag.
local function parse_tag(comment)
	local start = find_tag(comment)
	if not start then
		return nil, "no gavel: tag in --comment", true
	end
	local list, rest, err = split_pairs(comment:sub(start + #PREFIX))
	if not list then
		return nil, err
	elseif find_tag(rest) then
		return nil, "more than one gavel: tag in --comment"
	end
	local tag, seen = {}, {}
	for _, p in ipairs(list) do
		if seen[p.key] then
			return nil, "duplicate key " .. p.key .. "="
		end
		seen[p.key] = true
		err = set(tag, p.key, p.value)
		if err then
			return nil, err
		end
	end
	return tag
end

------------------------------------------------------------ canonical form
-- As the daemon's Tag.Format: parsing it gives the same tag back.

local function quote_if_needed(v)
	if not v:find("[ ,;\"'\\=\t\n\r]") then
		return v
	end
	v = v:gsub("\\", "\\\\")
	v = v:gsub('"', '\\"')
	return '"' .. v .. '"'
end

local function format_duration(secs)
	for _, u in ipairs({ { "w", 604800 }, { "d", 86400 }, { "h", 3600 }, { "m", 60 } }) do
		if secs % u[2] == 0 then
			return string.format("%.0f%s", secs / u[2], u[1])
		end
	end
	return string.format("%.0fs", secs)
end

-- shortest_digits returns the fewest significant digits that read back as
-- w, and the exponent of the first one: the digits of Go's shortest
-- formatting. The correctly rounded candidate of each length is tried
-- first, then its neighbours, which matter when w is a power of two (the
-- doubles below it are closer together than those above).
local function shortest_digits(w)
	for p = 1, 17 do
		local m, x = string.format("%." .. (p - 1) .. "e", w):match("^(%d[%d.]*)e([-+]%d+)$")
		local digits, exp = m:gsub("%.", ""), tonumber(x)
		local candidates = { { digits, exp } }
		local up = add_digits(digits, "1")
		if #up > p then
			candidates[#candidates + 1] = { up:sub(1, p), exp + 1 }
		else
			candidates[#candidates + 1] = { up, exp }
		end
		local down = sub_one(digits)
		if down:sub(1, 1) ~= "0" then
			candidates[#candidates + 1] = { down, exp }
		end
		for _, c in ipairs(candidates) do
			local back = tonumber(c[1]:sub(1, 1) .. "." .. c[1]:sub(2) .. "e" .. c[2])
			if back == w then
				local d = c[1]:gsub("0+$", "")
				return d, c[2]
			end
		end
	end
	return nil
end

-- format_float is strconv.FormatFloat(w, 'g', -1, 64) for w > 0.
local function format_float(w)
	local d, x = shortest_digits(w)
	if x < -4 or x >= 6 then
		local m = d:sub(1, 1)
		if #d > 1 then
			m = m .. "." .. d:sub(2)
		end
		local sign = "+"
		if x < 0 then
			sign, x = "-", -x
		end
		return string.format("%se%s%02d", m, sign, x)
	end
	local dp = x + 1
	if dp <= 0 then
		return "0." .. string.rep("0", -dp) .. d
	elseif dp >= #d then
		return d .. string.rep("0", dp - #d)
	end
	return d:sub(1, dp) .. "." .. d:sub(dp + 1)
end

local function format_tag(t)
	local parts = { PREFIX }
	local function add(key, value)
		parts[#parts + 1] = " " .. key .. "=" .. value
	end
	if t.model then
		add("model", quote_if_needed(t.model))
	end
	if t.steps then
		add("steps", string.format("%.0f", t.steps))
	end
	if t.weight then
		add("weight", format_float(t.weight))
	end
	if t.slo then
		add("slo", format_duration(t.slo))
	end
	if t.entity then
		add("entity", quote_if_needed(t.entity))
	end
	if t.class then
		add("class", t.class)
	end
	if t.grace then
		add("grace", format_duration(t.grace))
	end
	if t.preempt then
		add("preempt", t.preempt)
	end
	if t.mixed then
		add("mixed", t.mixed)
	end
	if t.restart then
		add("restart", format_duration(t.restart))
	end
	if t.share then
		add("share", t.share)
	end
	return table.concat(parts)
end

------------------------------------------------------------ the job

local function in_list(list, name)
	for _, v in ipairs(list) do
		if v == name then
			return true
		end
	end
	return false
end

-- managed tells whether a job asking for partition (a comma-separated
-- list, or nil for the default partition) runs where the daemon schedules.
local function managed(partition, part_list)
	if #settings.partitions == 0 then
		return true
	end
	local names = {}
	if partition and partition ~= "" then
		for name in partition:gmatch("[^,]+") do
			names[#names + 1] = name
		end
	else
		for name, part in pairs(part_list or {}) do
			if part.flag_default == 1 then
				names[#names + 1] = name
			end
		end
	end
	for _, name in ipairs(names) do
		if in_list(settings.partitions, name) then
			return true
		end
	end
	return false
end

-- with_tag puts tag (or nothing) in place of any gavel: tag in an admin
-- comment, keeping the other text.
local function with_tag(admin, tag)
	admin = admin or ""
	local start = find_tag(admin)
	if start then
		local _, rest = split_pairs(admin:sub(start + #PREFIX))
		admin = admin:sub(1, start - 1) .. " " .. (rest or "")
	end
	admin = admin:gsub("^[%s;]+", ""):gsub("[%s;]+$", "")
	if not tag then
		return admin
	elseif admin == "" then
		return tag
	end
	return admin .. "; " .. tag
end

-- untype rewrites the one typed GPU request of a TRES list
-- ("gres/gpu:v100:2" -> "gres/gpu:2") and returns the new list and the
-- type, or nil when there is nothing to rewrite.
local function untype(tres)
	if not tres or tres == "" then
		return nil
	end
	local items, typ = {}, nil
	for item in tres:gmatch("[^,]+") do
		local t, count = item:match("^gres/gpu:([^:]+):(%d+)$")
		if not t then
			t = item:match("^gres/gpu:([^:]+)$")
			count = "1"
			if t and t:find("^%d+$") then
				t = nil -- "gres/gpu:2" is a count
			end
		end
		if t then
			if typ or not in_list(settings.gpu_types, t) then
				return nil
			end
			typ = t
			item = "gres/gpu:" .. count
		end
		items[#items + 1] = item
	end
	if not typ then
		return nil
	end
	return table.concat(items, ","), typ
end

-- untype_gpus applies untype to the job's per-node and per-job requests
-- and adds the type to the constraint, when the constraint is a plain
-- list of features joined with &.
local function untype_gpus(job_desc)
	local features = job_desc.features or ""
	for feature in (features .. "&"):gmatch("([^&]*)&") do
		if features ~= "" and not feature:find("^[%w_%-%.]+$") then
			return
		end
	end
	for _, name in ipairs({ "tres_per_node", "tres_per_job" }) do
		local tres, typ = untype(job_desc[name])
		if tres then
			job_desc[name] = tres
			if features == "" then
				features = typ
			else
				features = features .. "&" .. typ
			end
			job_desc.features = features
			slurm.log_info("gavel-slurm: %s=%s becomes %s with constraint %s", name, typ, tres, features)
			return
		end
	end
end

-- check runs the rules for a job that asks for partition with comment; old
-- is the job's current admin comment, and set_admin tells whether it may
-- be changed. It returns a Slurm return code.
local function check(job_desc, comment, partition, part_list, old, set_admin, submit)
	if not managed(partition, part_list) then
		return slurm.SUCCESS
	end
	local tag, err, no_tag = parse_tag(comment or "")
	if no_tag and settings.require_tag and (submit or not set_admin) then
		slurm.log_user("%s", "gavel-slurm: jobs in this partition need a gavel: tag in --comment (see the site's documentation)")
		return slurm.ERROR
	end
	if no_tag then
		if settings.admin_comment and set_admin and old and find_tag(old) then
			job_desc.admin_comment = with_tag(old, nil)
		end
		return slurm.SUCCESS
	elseif not tag then
		slurm.log_user("%s", "gavel-slurm: not managed: " .. err)
		return slurm.ERROR
	end
	if settings.requeue then
		job_desc.requeue = 1
	end
	if settings.admin_comment and set_admin then
		local new = with_tag(old, format_tag(tag))
		if new ~= old then
			job_desc.admin_comment = new
		end
	end
	if submit and settings.untype_gpu_requests then
		untype_gpus(job_desc)
	end
	return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	return check(job_desc, job_desc.comment, job_desc.partition, part_list, job_desc.admin_comment, true, true)
end

-- A modification is checked only when it changes the comment or the
-- partition, or turns requeue off: the daemon's own updates (priority, constraint, hold) pass
-- untouched. Slurm refuses a change of the AdminComment in an update sent
-- by anyone but an administrator, even one made by this script, so the
-- copy of the tag follows a user's new comment only when root makes the
-- change; otherwise it keeps the tag the job was submitted with.
-- passwd_uid returns the uid /etc/passwd gives name, or nil.
local function passwd_uid(name)
	local f = io.open("/etc/passwd", "r")
	if not f then
		return nil
	end
	for line in f:lines() do
		local user, uid = line:match("^([^:]*):[^:]*:(%d+):")
		if user == name then
			f:close()
			return tonumber(uid)
		end
	end
	f:close()
	return nil
end

-- may_drop_lease reports whether uid may remove the daemon's lease from a
-- job's dependency: root, and the daemon's own users.
local function may_drop_lease(uid)
	if uid == 0 then
		return true
	end
	for _, u in ipairs(settings.daemon_uids) do
		if u == uid then
			return true
		end
	end
	for _, name in ipairs(settings.daemon_users) do
		if passwd_uid(name) == uid then
			return true
		end
	end
	return false
end

-- dropped_afterany returns the first afterany:N element of the
-- dependency old ("afterany:58(unfulfilled),afterok:12") that new no
-- longer has, or nil. Slurm's notes in parentheses are ignored.
local function dropped_afterany(old, new)
	local kept = {}
	for elem in (new or ""):gmatch("[^,?]+") do
		kept[(elem:gsub("%(.*%)$", ""))] = true
	end
	for elem in (old or ""):gmatch("[^,?]+") do
		local bare = elem:gsub("%(.*%)$", "")
		if bare:match("^afterany:%d+$") and not kept[bare] then
			return bare
		end
	end
	return nil
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	-- The scheduler preempts by requeueing, so the owner of a managed job
	-- may not turn requeue off (scontrol update jobid=N requeue=0); the
	-- daemon would otherwise never preempt it, whatever the site's
	-- allowed_preempt says. Administrators may.
	if settings.requeue and job_desc.requeue == 0 and modify_uid ~= 0 then
		local comment = job_desc.comment or job_rec.comment
		if managed(job_desc.partition or job_rec.partition, part_list) and parse_tag(comment or "") then
			slurm.log_user("%s", "gavel-slurm: requeue=0 refused: the job is scheduled by gavel-slurm, which preempts by requeueing")
			return slurm.ERROR
		end
	end
	-- Nor may the owner take the job off the daemon's lease (scontrol
	-- update jobid=N dependency=): it would start ahead of the allocation.
	if job_desc.dependency ~= nil and not may_drop_lease(modify_uid) then
		local dropped = dropped_afterany(job_rec.dependency, job_desc.dependency)
		local comment = job_desc.comment or job_rec.comment
		if dropped and managed(job_desc.partition or job_rec.partition, part_list) and parse_tag(comment or "") then
			slurm.log_user("gavel-slurm: dependency change refused: it drops %s, which keeps the job waiting for " ..
				"gavel-slurm's next round (ask an administrator to change it)", dropped)
			return slurm.ERROR
		end
	end
	if job_desc.comment == nil and job_desc.partition == nil then
		return slurm.SUCCESS
	end
	return check(job_desc, job_desc.comment or job_rec.comment, job_desc.partition or job_rec.partition,
		part_list, job_rec.admin_comment, modify_uid == 0, false)
end

-- For contrib/slurm's tests, which run this file outside slurmctld.
gavel_job_submit = {
	settings = settings,
	parse_tag = parse_tag,
	format_tag = format_tag,
	format_float = format_float,
	lower_rune = lower_rune,
	dropped_afterany = dropped_afterany,
	is_print = is_print,
	go_quote = go_quote,
}

return slurm.SUCCESS
