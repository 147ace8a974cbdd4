; out[lid * 16 + k] = the k-th float operation on x = in[lid] and y = in[lid + 32]
; Sync (Mesa ir3_legalize.c): (sy) before the ldib results are read, 3 cycles between an ALU result and an ALU
; reader, 6 before a memory instruction reads one, (ss) before an SFU result (rcp, sqrt) is read; a cat6
; instruction has no (ss) bit, so a nop carries it as Mesa's legalize inserts one.
@localsize 32, 1, 1
@buf 64   ; in
@buf 512  ; out
@invocationid(r0.x)
add.u r0.y, r0.x, 32
shl.b r0.z, r0.x, 4
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 0
(sy)add.f r2.x, r1.x, r1.y
mul.f r2.y, r1.x, r1.y
min.f r2.z, r1.x, r1.y
max.f r2.w, r1.x, r1.y
floor.f r3.x, r1.x
ceil.f r3.y, r1.x
trunc.f r3.z, r1.x
rndne.f r3.w, r1.x
absneg.f r4.x, (abs)r1.x
add.f r4.y, r1.x, (neg)(0.5)
mad.f32 r4.z, r1.x, r1.y, r1.x
cmps.f.lt r4.w, r1.x, r1.y
cov.f32s32 r5.x, r1.x
rcp r5.y, r1.y
sqrt r5.z, (abs)r1.x
(rpt1)nop
sel.b32 r5.w, r1.x, r4.w, r1.y
add.u r0.w, r0.z, 4
add.u r6.x, r0.z, 8
add.u r6.y, r0.z, 12
(ss)(rpt5)nop
stib.b.untyped.1d.u32.4.imm r2.x, r0.z, 1
stib.b.untyped.1d.u32.4.imm r3.x, r0.w, 1
stib.b.untyped.1d.u32.4.imm r4.x, r6.x, 1
stib.b.untyped.1d.u32.4.imm r5.x, r6.y, 1
end
nop
