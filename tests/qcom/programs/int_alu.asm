; out[lid * 16 + k] = the k-th integer operation on x = in[lid] and y = in[lid + 32]
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
mull.u r2.w, r1.x, r1.y
shl.b r3.x, r1.x, 3
shr.b r3.y, r1.x, 3
ashr.b r3.z, r1.x, 3
and.b r3.w, r1.x, r1.y
or.b r4.x, r1.x, r1.y
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
