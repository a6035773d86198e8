# weft_gdb.py: gdb commands for weft programs: list the fibers, and print a fiber's backtrace, in a
# live process or a core file.
#
#   (gdb) source tools/gdb/weft_gdb.py
#   (gdb) weft fibers              one line per fiber: id, state, what it waits on, for how long,
#                                  stack in use, name
#   (gdb) weft bt ID|NAME [full]   backtrace of one fiber (`full`: with locals, as `bt full`)
#   (gdb) weft bt all [full]       backtraces of every fiber
#   (gdb) weft gcore [FILE]        generate-core-file that keeps the fiber stacks (see below)
#   (gdb) weft info                the runtime descriptor the commands read
#
# Loading it automatically: add `source /path/to/weft/tools/gdb/weft_gdb.py` to ~/.gdbinit, or
# pass `-iex 'source /path/to/weft/tools/gdb/weft_gdb.py'` to gdb.
#
# No debug info is needed for weft's own structures (Release builds have none): the runtime
# exports a C descriptor, `weft_debug_info` (runtime/src/services/debug_info.hpp), with the offsets of the
# fields read here, the registry's shard layout, the running runtime's registry, the stack size and
# the name tables. Only its ELF symbol is needed: a binary stripped of its symbol table cannot be
# inspected (keep `weft_debug_info`, e.g. strip --keep-symbol=weft_debug_info).
#
# Backtraces of fibers that are not running (parked, or runnable after having run) start from the
# context the switch saved on the fiber's stack (weft's jump_context, which keeps the frame of
# Boost.Context's jump_fcontext, x86_64 SysV):
#   ctx+0x00 unused (jump_fcontext's mxcsr/x87 cw), +0x08 r12, +0x10 r13, +0x18 r14, +0x20 r15,
#   +0x28 rbx, +0x30 rbp, +0x38 return address; the stack pointer after the switch returns is ctx+0x40.
# gdb can write registers only in a live process, so instead a Python unwinder (the same in a live
# process and in a core file) makes the selected thread's innermost frame have the fiber's context
# as its caller while `weft bt` runs `bt`; the thread's own frames are then cut from the output and
# the fiber's frames are renumbered from #0. A running fiber's stack is a thread's stack: `weft bt`
# shows the backtrace of the thread whose stack pointer lies in the fiber's stack.

import re
import struct

import gdb
import gdb.unwinder

_MAGIC = 0x74666577  # "weft"
_FIELDS = (
    "fiber_ctx fiber_stack fiber_id fiber_state fiber_wait_reason fiber_wait_arg "
    "fiber_parked_at_ns fiber_reg_next fiber_name "
    "registry_shards registry_shard_count registry_shard_size registry_shard_head "
    "state_count state_names wait_reason_count wait_reason_names "
    "registry stack_size coarse_now"
).split()
# Version 2 appends these (stacks in size classes); a version-1 runtime has one size for all.
_FIELDS_V2 = "fiber_stack_class stack_class_count stack_class_sizes".split()
_HEADER = 16  # magic, version (u32 each), size (u64)
_MAX_FIBERS = 10_000_000  # a corrupt list must not loop forever
_MAX_NAME = 256


class _Error(gdb.GdbError):
    pass


# ---- reading the inferior ------------------------------------------------------------------------


def _read(addr, n):
    try:
        return bytes(gdb.selected_inferior().read_memory(addr, n))
    except gdb.MemoryError as e:
        raise _Error("weft: cannot read %d bytes at 0x%x: %s" % (n, addr, e))


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _i64(addr):
    return struct.unpack("<q", _read(addr, 8))[0]


def _u8(addr):
    return _read(addr, 1)[0]


def _cstring(addr, limit=_MAX_NAME):
    if not addr:
        return None
    try:
        data = _read(addr, limit)
    except _Error:
        return None
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _std_string(addr):
    """A libstdc++ std::string at addr: char* data at +0, size_t size at +8."""
    data, size = _u64(addr), _u64(addr + 8)
    if not data:
        return ""
    text = _read(data, min(size, _MAX_NAME)).decode("utf-8", "replace")
    return text + ("..." if size > _MAX_NAME else "")


# ---- the runtime descriptor ----------------------------------------------------------------------


class _Info:
    def __init__(self):
        try:
            self.addr = int(gdb.parse_and_eval("&weft_debug_info"))
        except gdb.error:
            raise _Error(
                "weft: no symbol weft_debug_info here: not a weft program, a weft older than this "
                "script, or a binary stripped of its symbol table (load its symbols, e.g. "
                "`file PROGRAM` or `symbol-file PROGRAM.debug`)"
            )
        magic, version, size = struct.unpack("<IIQ", _read(self.addr, _HEADER))
        if magic != _MAGIC:
            raise _Error("weft: weft_debug_info at 0x%x has a bad magic (0x%x)" % (
                self.addr, magic))
        need = _HEADER + 8 * len(_FIELDS)
        if version < 1 or size < need:
            raise _Error(
                "weft: weft_debug_info version %d (%d bytes) is older than this script expects"
                % (version, size)
            )
        self.version = version
        self.size = size
        values = struct.unpack("<%dQ" % len(_FIELDS), _read(self.addr + _HEADER, need - _HEADER))
        for name, value in zip(_FIELDS, values):
            setattr(self, name, value)
        self.class_sizes = None
        need2 = need + 8 * len(_FIELDS_V2)
        if version >= 2 and size >= need2:
            v2 = struct.unpack("<%dQ" % len(_FIELDS_V2), _read(self.addr + need, need2 - need))
            for name, value in zip(_FIELDS_V2, v2):
                setattr(self, name, value)
            if self.stack_class_sizes:
                n = min(self.stack_class_count, 64)
                self.class_sizes = list(
                    struct.unpack("<%dQ" % n, _read(self.stack_class_sizes, 8 * n)))
        self.state_table = self._names(self.state_names, self.state_count)
        self.reason_table = self._names(self.wait_reason_names, self.wait_reason_count)

    @staticmethod
    def _names(table, count):
        if not table:
            return []
        return [_cstring(_u64(table + 8 * i), 64) or "?" for i in range(min(count, 256))]

    def state_name(self, s):
        return self.state_table[s] if s < len(self.state_table) else "state %d" % s

    def reason_name(self, r):
        return self.reason_table[r] if r < len(self.reason_table) else "reason %d" % r

    def now_ns(self):
        return _i64(self.coarse_now) if self.coarse_now else None

    def fiber_stack_size(self, fiber_addr):
        """Usable bytes of the fiber's stack: its size class's, or the one size (version 1)."""
        if self.class_sizes is None:
            return self.stack_size
        cls = _u8(fiber_addr + self.fiber_stack_class)
        return self.class_sizes[cls] if cls < len(self.class_sizes) else self.stack_size


class _Fiber:
    def __init__(self, info, addr):
        self.addr = addr
        self.id = _u64(addr + info.fiber_id)
        self.state = info.state_name(_u8(addr + info.fiber_state))
        self.reason = info.reason_name(_u8(addr + info.fiber_wait_reason))
        self.arg = _i64(addr + info.fiber_wait_arg)
        self.parked_at = _i64(addr + info.fiber_parked_at_ns)
        self.ctx = _u64(addr + info.fiber_ctx)
        self.stack = _u64(addr + info.fiber_stack)
        self.stack_size = info.fiber_stack_size(addr)
        self.stack_top = self.stack + self.stack_size if self.stack else 0
        name_ptr = _u64(addr + info.fiber_name)
        try:
            self.name = _std_string(name_ptr) if name_ptr else ""
        except _Error:
            self.name = "<unreadable name at 0x%x>" % name_ptr
        self.thread = None  # the gdb thread running it, for running fibers
        self.thread_sp = None

    def on_stack(self, sp):
        return self.stack != 0 and self.stack <= sp < self.stack_top

    def has_saved_context(self):
        return self.state != "running" and self.ctx != 0 and self.stack <= self.ctx < self.stack_top

    def label(self):
        return "fiber %d%s" % (self.id, ' "%s"' % self.name if self.name else "")

    def waiting_on(self):
        if self.state == "running":
            return "thread %d" % self.thread.num if self.thread else "-"
        if self.state != "parked":
            return "-"
        text = self.reason
        if self.arg >= 0:
            if self.reason in ("io read", "io write"):
                text += " fd %d" % self.arg
            elif self.reason == "join":
                text += " fiber %d" % self.arg
        return text

    def stack_used(self):
        if self.state == "running" and self.thread_sp is not None:
            return self.stack_top - self.thread_sp
        if self.has_saved_context():
            return self.stack_top - self.ctx
        return None


def _fibers(info):
    if not info.registry:
        return None
    fibers, seen = [], set()
    for i in range(info.registry_shard_count):
        shard = info.registry + info.registry_shards + i * info.registry_shard_size
        f = _u64(shard + info.registry_shard_head)
        while f and f not in seen and len(seen) < _MAX_FIBERS:
            seen.add(f)
            fiber = _Fiber(info, f)
            if fiber.state != "done":  # ended, waiting to be unlinked in a batch
                fibers.append(fiber)
            f = _u64(f + info.fiber_reg_next)
    fibers.sort(key=lambda fb: fb.id)
    _find_threads(fibers)
    return fibers


def _thread_sps():
    """(thread, innermost stack pointer) of every thread of the selected inferior."""
    inf = gdb.selected_inferior()
    result = []
    current = gdb.selected_thread()
    try:
        frame = gdb.selected_frame() if current else None
    except gdb.error:
        frame = None
    try:
        for t in inf.threads():
            if not t.is_valid():
                continue
            try:
                t.switch()
                result.append((t, int(gdb.newest_frame().read_register("rsp"))))
            except gdb.error:
                pass
    finally:
        if current is not None and current.is_valid():
            current.switch()
            if frame is not None:
                try:
                    frame.select()
                except gdb.error:
                    pass
    return result


def _find_threads(fibers):
    running = [f for f in fibers if f.state == "running" and f.stack]
    if not running:
        return
    for t, sp in _thread_sps():
        for f in running:
            if f.on_stack(sp):
                f.thread, f.thread_sp = t, sp


def _need_target():
    if not gdb.selected_inferior().threads():
        raise _Error("weft: no process or core file: run the program, attach to it, or load a core")


def _load():
    _need_target()
    info = _Info()
    fibers = _fibers(info)
    if fibers is None:
        raise _Error("weft: no weft runtime is running (weft::run() has not started or has ended)")
    return info, fibers


def _size(n):
    if n is None:
        return "-"
    if n < 10 * 1024:
        return "%d B" % n
    return "%.1f KiB" % (n / 1024.0)


# ---- backtraces through a saved context ----------------------------------------------------------


def _reg_value(v):
    # gdb.Value of an int is a signed long: map the upper half of the u64 range onto negatives.
    # (gdb 13 wants gdb.Value objects, not ints, in frame ids and saved registers.)
    return gdb.Value(v - (1 << 64) if v >= 1 << 63 else v)


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = _reg_value(sp)
        self.pc = _reg_value(pc)


class _FiberUnwinder(gdb.unwinder.Unwinder):
    """While a job is set: the innermost normal frame of job['thread'] (the one whose registers
    are the thread's own) unwinds to the fiber's saved context instead of to its real caller."""

    def __init__(self):
        super().__init__("weft-fiber")
        self.enabled = False
        self.job = None
        self.claimed_level = None

    def __call__(self, pending):
        job = self.job
        if job is None:
            return None
        thread = gdb.selected_thread()
        if thread is None or thread.ptid != job["ptid"]:
            return None
        if int(pending.read_register("rsp")) != job["sp"]:
            return None
        pc = int(pending.read_register("rip"))
        if pc != job["pc"]:
            return None
        # The frame's id must be unique and below the fiber's frames on the same stack, or gdb
        # stops with "previous frame inner to this frame" when the fiber's stack lies below the
        # thread's: use the address of the saved context.
        info = pending.create_unwind_info(_FrameId(job["ctx"], pc))
        for reg, value in job["regs"]:
            info.add_saved_register(reg, _reg_value(value))
        self.claimed_level = pending.level()
        return info


_unwinder = _FiberUnwinder()
gdb.unwinder.register_unwinder(None, _unwinder, replace=True)

_FRAME_LINE = re.compile(r"^#(\d+)\s+")
# A fiber's outermost frame: Boost.Context's entry trampoline. What gdb finds beyond it is noise
# ("Backtrace stopped: Cannot access memory", a null pc).
_ENTRY_FRAME = re.compile(r" in make_fcontext \(")


def _trim_outer(lines):
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if _FRAME_LINE.match(line) and _ENTRY_FRAME.search(line):
            # keep the lines of this frame (locals of `bt full`), drop the rest
            for rest in lines[i + 1:]:
                if _FRAME_LINE.match(rest) or not rest.startswith((" ", "\t")):
                    break
                out.append(rest)
            break
    return out


def _check_arch():
    arch = gdb.selected_inferior().architecture().name()
    if arch != "i386:x86-64":
        raise _Error("weft: fiber backtraces support x86_64 only (this is %s)" % arch)


def _saved_regs(ctx):
    words = struct.unpack("<8Q", _read(ctx, 0x40))
    return [
        ("rip", words[7]),
        ("rsp", ctx + 0x40),
        ("rbp", words[6]),
        ("rbx", words[5]),
        ("r12", words[1]),
        ("r13", words[2]),
        ("r14", words[3]),
        ("r15", words[4]),
    ]


def _fiber_frames(fiber, bt_args):
    """The fiber's backtrace text, frames renumbered from #0."""
    _check_arch()
    thread = gdb.selected_thread()
    if thread is None:
        raise _Error("weft: no thread selected")
    frame0 = gdb.newest_frame()
    try:
        selected = gdb.selected_frame()
    except gdb.error:
        selected = None
    _unwinder.job = {
        "ptid": thread.ptid,
        "sp": int(frame0.read_register("rsp")),
        "pc": int(frame0.read_register("rip")),
        "ctx": fiber.ctx,
        "regs": _saved_regs(fiber.ctx),
    }
    _unwinder.claimed_level = None
    _unwinder.enabled = True
    gdb.invalidate_cached_frames()
    try:
        text = gdb.execute(("backtrace " + bt_args).strip(), to_string=True)
        claimed = _unwinder.claimed_level
    finally:
        _unwinder.enabled = False
        _unwinder.job = None
        gdb.invalidate_cached_frames()
        if selected is not None:
            try:
                selected.select()
            except gdb.error:
                pass
    if claimed is None:
        raise _Error("weft: could not graft %s's saved context onto the frames" % fiber.label())
    skip = claimed + 1  # the thread's own frames: its innermost normal frame and inline ones
    out, keep = [], False
    for line in text.splitlines():
        m = _FRAME_LINE.match(line)
        if m:
            level = int(m.group(1))
            keep = level >= skip
            if keep:
                line = "#%-2d %s" % (level - skip, line[m.end():])
        elif not line.startswith((" ", "\t")) and line:
            keep = True  # "Backtrace stopped: ...", "(More stack frames follow...)"
        if keep:
            out.append(line)
    return "\n".join(_trim_outer(out)) + "\n"


def _thread_frames(thread, bt_args):
    current = gdb.selected_thread()
    try:
        selected = gdb.selected_frame()
    except gdb.error:
        selected = None
    try:
        thread.switch()
        text = gdb.execute(("backtrace " + bt_args).strip(), to_string=True)
        return "\n".join(_trim_outer(text.splitlines())) + "\n"
    finally:
        if current is not None and current.is_valid():
            current.switch()
            if selected is not None:
                try:
                    selected.select()
                except gdb.error:
                    pass


def _backtrace(info, fiber, bt_args):
    state = fiber.state
    if state == "parked":
        state += ": " + fiber.waiting_on()
    head = "%s [%s]" % (fiber.label(), state)
    if fiber.state == "running":
        if fiber.thread is None:
            return head + (": running, but no thread's stack pointer is in its stack (a signal "
                           "handler on an alternate stack?): try `thread apply all bt`\n")
        return "%s on thread %d (%s):\n%s" % (
            head,
            fiber.thread.num,
            fiber.thread.name or "LWP %d" % fiber.thread.ptid[1],
            _thread_frames(fiber.thread, bt_args),
        )
    if not fiber.ctx or not fiber.stack:
        return head + ": has not run yet, no stack\n"
    if not fiber.has_saved_context():
        return head + ": no saved context (ctx 0x%x outside its stack)\n" % fiber.ctx
    return head + ":\n" + _fiber_frames(fiber, bt_args)


def _pick(fibers, key):
    if key.isdigit():
        found = [f for f in fibers if f.id == int(key)]
    else:
        found = [f for f in fibers if f.name == key]
    if not found:
        raise _Error("weft: no fiber with %s %s (see `weft fibers`)" % (
            "id" if key.isdigit() else "name", key))
    return found


# ---- core files --------------------------------------------------------------------------------
#
# Since Linux 6.13 weft makes its guard pages with madvise(MADV_GUARD_INSTALL), inside the stacks'
# mapping. gdb's generate-core-file copies a mapping in 1 MiB reads, and a read that touches a
# guard page fails whole ("warning: Memory read failed for corefile section"), so the core file
# gets no fiber stacks at all. `weft gcore` writes the core with gdb, then copies the part of each
# fiber's stack that is in use into it. (Core files written by the kernel are complete.)

_PT_LOAD = 1
_RED_ZONE = 128  # a running fiber's thread may use 128 bytes below its stack pointer


def _core_segments(f):
    ehdr = f.read(64)
    if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
        raise _Error("weft: %s is not a 64-bit little-endian ELF core file" % f.name)
    phoff, shoff = struct.unpack_from("<QQ", ehdr, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", ehdr, 0x36)
    if phnum == 0xFFFF:  # PN_XNUM: the real count is section header 0's sh_info
        f.seek(shoff + 0x2C)
        phnum = struct.unpack("<I", f.read(4))[0]
    segments = []
    for i in range(phnum):
        f.seek(phoff + i * phentsize)
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack("<IIQQQQ", f.read(40))
        if p_type == _PT_LOAD and p_filesz:
            segments.append((p_vaddr, p_vaddr + p_filesz, p_offset))
    return segments


def _read_pages(lo, hi):
    """(address, bytes) runs of [lo, hi) that can be read, page by page where a read fails."""
    try:
        return [(lo, _read(lo, hi - lo))]
    except _Error:
        pass
    runs, page = [], 4096
    addr = lo
    while addr < hi:
        end = min(hi, (addr // page + 1) * page)
        try:
            runs.append((addr, _read(addr, end - addr)))
        except _Error:
            pass
        addr = end
    return runs


def _patch_core(path, fibers):
    """Copies the in-use part of every fiber's stack from the live process into the core file."""
    ranges = []
    for fb in fibers:
        if fb.has_saved_context():
            ranges.append((fb.ctx, fb.stack_top))
        elif fb.state == "running" and fb.thread_sp is not None:
            ranges.append((max(fb.stack, fb.thread_sp - _RED_ZONE), fb.stack_top))
    copied = missing = 0
    with open(path, "r+b") as f:
        segments = _core_segments(f)
        for lo, hi in ranges:
            seg = next((s for s in segments if s[0] <= lo and hi <= s[1]), None)
            if seg is None:
                missing += 1
                continue
            for addr, data in _read_pages(lo, hi):
                f.seek(seg[2] + (addr - seg[0]))
                f.write(data)
                copied += len(data)
    return len(ranges), copied, missing


# ---- commands ------------------------------------------------------------------------------------

_HELP = """\
weft: inspect the fibers of a weft program (live process or core file).

  weft fibers              list every fiber: id, state, what a parked fiber waits on and
                           for how long, stack in use, name
  weft bt ID|NAME [full]   backtrace of a fiber, by id or by name (all fibers of that name);
                           `full` adds locals; other words are passed on to `backtrace`
  weft bt all [full]       backtraces of every fiber
  weft gcore [FILE]        generate-core-file, plus the fiber stacks that gdb fails to copy
                           around weft's guard pages (Linux >= 6.13); default FILE core.PID
  weft info                the runtime descriptor (weft_debug_info) these commands read
"""


class _WeftCommand(gdb.Command):
    """Inspect the fibers of a weft program: weft fibers, weft bt ID|NAME|all [full], weft info."""

    def __init__(self):
        super().__init__("weft", gdb.COMMAND_STACK, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        if arg.strip():
            raise _Error("weft: unknown command `%s`\n%s" % (arg.strip(), _HELP))
        gdb.write(_HELP)


class _FibersCommand(gdb.Command):
    """List weft's fibers: id, state, what a parked fiber waits on and for how long, stack in
    use (from the top of its stack to its saved context, or to the running thread's stack
    pointer), name."""

    def __init__(self):
        super().__init__("weft fibers", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        info, fibers = _load()
        now = info.now_ns()
        sizes = sorted({f.stack_size for f in fibers} | {info.stack_size})
        lines = ["weft: %d fibers, stacks of %s" % (len(fibers), " and ".join(_size(n) for n in sizes))]
        lines.append("%8s  %-9s %-20s %9s %11s  %s" % (
            "ID", "STATE", "WAITING ON", "FOR", "STACK USED", "NAME"))
        for f in fibers:
            waited = "-"
            if f.state == "parked" and now is not None and f.parked_at:
                waited = "%d ms" % max(0, (now - f.parked_at) // 1_000_000)
            lines.append("%8d  %-9s %-20s %9s %11s  %s" % (
                f.id, f.state, f.waiting_on(), waited, _size(f.stack_used()),
                '"%s"' % f.name if f.name else ""))
        gdb.write("\n".join(lines) + "\n")


class _BtCommand(gdb.Command):
    """Backtrace of a weft fiber: weft bt ID|NAME|all [full] [other backtrace options].
    A parked or runnable fiber's frames start from the context it saved when it switched away;
    a running fiber's are those of the thread running it."""

    def __init__(self):
        super().__init__("weft bt", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        words = gdb.string_to_argv(arg)
        if not words:
            raise _Error("usage: weft bt ID|NAME|all [full]")
        key, rest = words[0], " ".join(words[1:])
        info, fibers = _load()
        chosen = fibers if key == "all" else _pick(fibers, key)
        for i, f in enumerate(chosen):
            if i:
                gdb.write("\n")
            try:
                gdb.write(_backtrace(info, f, rest))
            except gdb.error as e:
                gdb.write("%s: %s\n" % (f.label(), e))


class _InfoCommand(gdb.Command):
    """Show the weft_debug_info descriptor that the weft commands read."""

    def __init__(self):
        super().__init__("weft info", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        info = _Info()
        lines = ["weft_debug_info at 0x%x: version %d, %d bytes" % (
            info.addr, info.version, info.size)]
        for name in _FIELDS + [n for n in _FIELDS_V2 if hasattr(info, n)]:
            lines.append("  %-20s 0x%x" % (name, getattr(info, name)))
        lines.append("  states:       " + ", ".join(info.state_table))
        lines.append("  wait reasons: " + ", ".join(info.reason_table))
        gdb.write("\n".join(lines) + "\n")


class _GcoreCommand(gdb.Command):
    """Write a core file of the live process: weft gcore [FILE] (default core.PID).
    Like generate-core-file, and then copies in the in-use part of every fiber's stack, which
    gdb cannot copy when weft's guard pages are MADV_GUARD_INSTALL ones (Linux >= 6.13)."""

    def __init__(self):
        super().__init__("weft gcore", gdb.COMMAND_FILES, gdb.COMPLETE_FILENAME)

    def invoke(self, arg, from_tty):
        words = gdb.string_to_argv(arg)
        inf = gdb.selected_inferior()
        if not inf.pid or not inf.threads():
            raise _Error("weft gcore: no live process")
        path = words[0] if words else "core.%d" % inf.pid
        info, fibers = _load()
        gdb.execute("generate-core-file %s" % path)
        n, copied, missing = _patch_core(path, fibers)
        gdb.write("weft: copied the stacks in use of %d fibers (%s) into %s%s\n" % (
            n, _size(copied), path,
            "; %d not in any segment of the core" % missing if missing else ""))


_WeftCommand()
_FibersCommand()
_BtCommand()
_GcoreCommand()
_InfoCommand()
