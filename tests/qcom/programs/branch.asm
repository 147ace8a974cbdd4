; divergent branches: out[lid] = lid * 2 for odd lid, lid + 100 for even lid
; Sync (Mesa ir3_legalize.c): 3 cycles between an ALU result and an ALU reader, 6 between a compare and the branch
; reading p0 or a memory instruction reading a result ((rpt5)nop); (jp) marks the join
@localsize 64, 1, 1
@buf 64
@invocationid(r0.x)
and.b r0.y, r0.x, 1
(rpt3)nop
cmps.u.ne p0.x, r0.y, 0
(rpt5)nop
br !p0.x, #even
shl.b r1.x, r0.x, 1
jump #join
even:
add.u r1.x, r0.x, 100
join:
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
