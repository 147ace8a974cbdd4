; out[lid * 16 + k] = the k-th integer operation on x = in[lid] and y = in[lid + 32]
; mull.u multiplies the low 16 bits of its sources (nir umul_low); the full 32-bit product (column 3) is Mesa's
; lowering of imul (src/freedreno/ir3/ir3_nir_imul.py): imadsh_mix16(y, x, imadsh_mix16(x, y, umul_low(x, y))),
; madsh.m16 being imadsh_mix16 ((src1 >> 16) * (src2 & 0xffff) << 16) + src3.
; Sync (Mesa ir3_legalize.c): (sy) before the ldib results are read, 3 cycles between an ALU result and an ALU
; reader (madsh reads its third source 2 cycles late), 6 before a memory instruction reads one ((rpt5)nop).
@localsize 32, 1, 1
@buf 64   ; in
@buf 512  ; out
@invocationid(r0.x)
add.u r0.y, r0.x, 32
shl.b r0.z, r0.x, 4
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 0
(sy)add.s r2.x, r1.x, r1.y
sub.u r2.y, r1.x, r1.y
mul.u24 r2.z, r1.x, r1.y
mull.u r7.x, r1.x, r1.y
shl.b r3.x, r1.x, 3
shr.b r3.y, r1.x, 3
madsh.m16 r7.y, r1.x, r1.y, r7.x
ashr.b r3.z, r1.x, 3
and.b r3.w, r1.x, r1.y
or.b r4.x, r1.x, r1.y
madsh.m16 r2.w, r1.y, r1.x, r7.y
xor.b r4.y, r1.x, r1.y
min.s r4.z, r1.x, r1.y
max.u r4.w, r1.x, r1.y
absneg.s r5.x, (neg)r1.x
clz.b r5.y, r1.x
bfrev.b r5.z, r1.x
cbits.b r5.w, r1.x
add.u r0.w, r0.z, 4
add.u r6.x, r0.z, 8
add.u r6.y, r0.z, 12
(rpt5)nop
stib.b.untyped.1d.u32.4.imm r2.x, r0.z, 1
stib.b.untyped.1d.u32.4.imm r3.x, r0.w, 1
stib.b.untyped.1d.u32.4.imm r4.x, r6.x, 1
stib.b.untyped.1d.u32.4.imm r5.x, r6.y, 1
end
nop
