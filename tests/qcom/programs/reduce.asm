; a work-group sum in local memory: a tree of halving strides with a barrier per level; out[wgid] = sum of the
; group's 64 inputs
; Sync (Mesa ir3_legalize.c): ldib results are waited for with (sy), local loads (ldl) with (ss) -- a cat6
; instruction has no (ss) bit, so a nop carries it --, ALU results are read 3 cycles later by ALU instructions and 6
; by memory instructions and branches
@localsize 64, 1, 1
@buf 256  ; in
@buf 4    ; out
@invocationid(r0.x)
@wgid(r48.x)
shl.b r0.y, r48.x, 6
(rpt2)nop
add.u r0.y, r0.y, r0.x
shl.b r0.z, r0.x, 2
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.y, 0
(sy)stl.u32 l[r0.z], r1.x, 1
mov.u32u32 r2.x, 32
(rpt2)nop
loop:
bar
cmps.u.lt p0.x, r0.x, r2.x
(rpt5)nop
br !p0.x, #skip
add.u r2.y, r0.x, r2.x
(rpt2)nop
shl.b r2.y, r2.y, 2
(rpt5)nop
ldl.u32 r1.y, l[r2.y], 1
ldl.u32 r1.x, l[r0.z], 1
(ss)add.u r1.x, r1.x, r1.y
(rpt5)nop
stl.u32 l[r0.z], r1.x, 1
skip:
(jp)shr.b r2.x, r2.x, 1
(rpt3)nop
cmps.u.gt p0.x, r2.x, 0
(rpt5)nop
br p0.x, #loop
(jp)bar
cmps.u.eq p0.x, r0.x, 0
(rpt5)nop
br !p0.x, #done
ldl.u32 r1.x, l[r0.z], 1
(ss)nop
stib.b.untyped.1d.u32.1.imm r1.x, r48.x, 1
done:
(jp)end
nop
