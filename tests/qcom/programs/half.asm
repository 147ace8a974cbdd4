; half precision: x, y converted to f16, operated on in half registers, converted back; out[lid * 4 + k]
; Sync (Mesa ir3_legalize.c): (sy) before the ldib results are read; ALU results read by ALU instructions of the
; same size 3 cycles later, by memory instructions 6 ((rpt5)nop covers both)
@localsize 32, 1, 1
@buf 64   ; in (f32)
@buf 128  ; out (f32)
@invocationid(r0.x)
add.u r0.y, r0.x, 32
shl.b r0.z, r0.x, 2
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 0
(sy)cov.f32f16 hr4.x, r1.x
cov.f32f16 hr4.y, r1.y
(rpt5)nop
mul.f hr5.x, hr4.x, hr4.y
add.f hr5.y, hr4.x, hr4.y
mad.f16 hr5.z, hr4.x, hr4.y, hr4.x
max.f hr5.w, hr4.x, hr4.y
(rpt5)nop
cov.f16f32 r3.x, hr5.x
cov.f16f32 r3.y, hr5.y
cov.f16f32 r3.z, hr5.z
cov.f16f32 r3.w, hr5.w
(rpt5)nop
stib.b.untyped.1d.u32.4.imm r3.x, r0.z, 1
end
nop
