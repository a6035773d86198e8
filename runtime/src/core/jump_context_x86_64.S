// weft_jump_context(fcontext_t to, void* data) -> transfer_t{from, data}: the instruction
// sequence that moves a kernel thread from one fiber's stack to another's (x86-64 System V, ELF).
//
// Origin and licence: derived from Boost.Context's jump_fcontext
// (libs/context/src/asm/jump_x86_64_sysv_elf_gas.S, Boost 1.74),
//     Copyright Oliver Kowalke 2009.
//     Distributed under the Boost Software License, Version 1.0.
// (see LICENSES/BSL-1.0.txt and NOTICE). weft's changes are under the Apache License 2.0.
//
// It is Boost.Context's jump_fcontext (1.74) without the floating-point control state: the same
// 0x40-byte frame on the stack that switches away (+0x00 left unused where Boost keeps MXCSR and
// the x87 control word, +0x08 r12, +0x10 r13, +0x18 r14, +0x20 r15, +0x28 rbx, +0x30 rbp, +0x38
// the return address), the same registers on the way out (rax = rdi = the saved context, rdx =
// rsi = data), so contexts made by make_fcontext start through it and tools/gdb/weft_gdb.py reads
// a parked fiber's registers where it always did.
//
// Why not jump_fcontext: its ldmxcsr and fldcw cost more than the rest of the jump together
// (4.7 ns per jump against 2.1 ns), and the call went through the PLT. The
// floating-point environment (rounding mode, exception masks) therefore belongs to the thread,
// as in Go: a fiber that changes it restores it before it parks or yields.
//
// It ends in `ret`, where Boost ends in `pop %r8; jmp *%r8`, to keep the CPU's return-stack
// predictor in step. Every jump is made from one call site (switch_to, kept out of line for
// this), so the address a resumed fiber returns to is the same address the jumping side's call
// pushed: the `ret` is predicted, and so are the returns after it, out of switch_to and its
// caller, which run the same code in every fiber. An indirect jump instead leaves the call's
// entry on the predictor's stack, so every later return is predicted one frame off: two
// mispredicted returns per switch, two thirds of the cost of a yield (A/B, medians of 5: the
// switch bench 30.7 -> 10.4 ns, chan_pingpong 126 -> 69 ns per round trip). The exception is a
// fiber's first run, which returns into make_fcontext's trampoline: one miss per fiber.
// (A `ret` to another address than the call pushed would fault under a CET shadow stack; the
// object is not marked shadow-stack compatible, so the kernel never enables one for a program
// linked with it.)
    .text
    .globl weft_jump_context
    .hidden weft_jump_context
    .type weft_jump_context, @function
    .align 16
weft_jump_context:
    .cfi_startproc
    leaq  -0x38(%rsp), %rsp
    .cfi_adjust_cfa_offset 0x38   // the frame on the entered stack has the same shape
    movq  %r12, 0x08(%rsp)
    movq  %r13, 0x10(%rsp)
    movq  %r14, 0x18(%rsp)
    movq  %r15, 0x20(%rsp)
    movq  %rbx, 0x28(%rsp)
    movq  %rbp, 0x30(%rsp)
    movq  %rsp, %rax          // the context we leave: returned to whoever resumes
    movq  %rdi, %rsp          // the context we enter
    movq  0x08(%rsp), %r12
    movq  0x10(%rsp), %r13
    movq  0x18(%rsp), %r14
    movq  0x20(%rsp), %r15
    movq  0x28(%rsp), %rbx
    movq  0x30(%rsp), %rbp
    leaq  0x38(%rsp), %rsp
    movq  %rsi, %rdx          // transfer_t.data
    movq  %rax, %rdi          // a fresh context's entry function takes transfer_t in rdi:rsi
    ret
    .cfi_endproc
    .size weft_jump_context, .-weft_jump_context
    .section .note.GNU-stack, "", %progbits
