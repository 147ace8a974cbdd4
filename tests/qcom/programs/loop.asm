; a loop whose trip count differs per fiber: out[lid] = 0 + 1 + ... + lid
; Sync (Mesa ir3_legalize.c): 3 cycles between an ALU result and an ALU reader, 6 between a compare and the branch
; reading p0 or a memory instruction reading a result ((rpt5)nop)
@localsize 64, 1, 1
@buf 64
@invocationid(r0.x)
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, 0
(rpt2)nop
loop:
add.u r1.x, r1.x, r1.y
add.u r1.y, r1.y, 1
(rpt3)nop
cmps.u.le p0.x, r1.y, r0.x
(rpt5)nop
br p0.x, #loop
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
