; c[i] = a[i] + b[i] (float), i = work-group id * 64 + local id
; Sync (Mesa ir3_legalize.c): (sy) before the ldib results are read; 3 cycles between an ALU result and an ALU
; reader ((rpt2)nop), 6 before a memory instruction reads one ((rpt5)nop)
@localsize 64, 1, 1
@buf 256  ; a
@buf 256  ; b
@buf 256  ; c
@invocationid(r0.x)
@wgid(r48.x)
shl.b r0.y, r48.x, 6
(rpt2)nop
add.u r0.y, r0.y, r0.x
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.y, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 1
(sy)add.f r1.z, r1.x, r1.y
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.z, r0.y, 2
end
nop
