; atomics: every fiber adds 1 to counters[0] through the IBO (atomic.b) and keeps the old value it saw, adds its
; local id to counters[1] through its global address (atomic.g), and adds 1 to a local-memory counter (atomic.l)
; that fiber 0 of each group stores to counters[2 + wgid].
; Operands as Mesa's compiler builds them (src/freedreno/ir3/ir3_a6xx.c emit_intrinsic_atomic_ssbo): atomic.b's
; first register is a vector whose .x receives the old value and .y holds the data (.z the new value of a cmpxchg);
; atomic.g's data is its third operand.
; Sync as Mesa's ir3_legalize.c requires: an ALU result is read by a memory instruction 6 cycles later
; ((rpt5)nop), local loads (ldl) are waited for with (ss), IBO and global atomics with (sy).
@localsize 64, 1, 1
@buf 8 (c4.x)  ; counters
@buf 128       ; the old value each fiber saw
@invocationid(r0.x)
@wgid(r48.x)
shl.b r0.y, r48.x, 6
(rpt2)nop
add.u r0.y, r0.y, r0.x
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, 1
mov.u32u32 r1.z, 0
(rpt5)nop
atomic.b.add.untyped.1d.u32.1.imm r1.x, r1.z, 0
mov.u32u32 r2.x, c4.x
mov.u32u32 r2.y, c4.y
(rpt2)nop
add.u r2.x, r2.x, 4
mov.u32u32 r3.x, r0.x
(rpt5)nop
atomic.g.add.untyped.1d.u32.1.g r3.y, r2.x, r3.x
mov.u32u32 r4.x, 0
mov.u32u32 r4.y, 0
mov.u32u32 r4.z, 1
(rpt5)nop
stl.u32 l[r4.x], r4.y, 1
bar
atomic.add.untyped.1d.u32.1.l r4.w, l[r4.x], r4.z
bar
ldl.u32 r5.x, l[r4.x], 1
add.u r5.y, r48.x, 2
cmps.u.eq p0.x, r0.x, 0
(rpt5)nop
br !p0.x, #skip
(ss)nop
stib.b.untyped.1d.u32.1.imm r5.x, r5.y, 0
skip:
(sy)(jp)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.y, 1
end
nop
