"""Hand-written PTX (ISA 7.0, sm_80 and later; runs on the mock, and through nvJitLink/ptxas on hardware) for `hcq
demo` and `hcq decode --device`: VADD_PTX's vadd(a, b, c, n): c[i] = a[i] + b[i] for i < n, one thread per element;
MATMUL_PTX's matmul(a, b, c, M, N, K): c = a (M x K) @ b (K x N), row-major floats, a thread per element of c
(x: column, y: row), the products summed in k order with fma.rn."""

VADD_PTX = b"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry vadd(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  ld.param.u32 %r5, [n];
  setp.ge.u32 %p1, %r4, %r5;
  @%p1 bra $L_done;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [c];
  mul.wide.u32 %rd4, %r4, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  add.s64 %rd7, %rd3, %rd4;
  ld.global.f32 %f1, [%rd5];
  ld.global.f32 %f2, [%rd6];
  add.rn.f32 %f3, %f1, %f2;
  st.global.f32 [%rd7], %f3;
$L_done:
  ret;
}
"""

MATMUL_PTX = b"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry matmul(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 M, .param .u32 N, .param .u32 K)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<10>;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  mov.u32 %r5, %ctaid.y;
  mov.u32 %r6, %ntid.y;
  mov.u32 %r7, %tid.y;
  mad.lo.s32 %r8, %r5, %r6, %r7;
  ld.param.u32 %r9, [M];
  ld.param.u32 %r10, [N];
  ld.param.u32 %r11, [K];
  setp.ge.u32 %p1, %r8, %r9;
  setp.ge.u32 %p2, %r4, %r10;
  or.pred %p3, %p1, %p2;
  @%p3 bra $L_done;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [c];
  mov.f32 %f1, 0f00000000;
  mov.u32 %r12, 0;
  setp.eq.u32 %p1, %r11, 0;
  @%p1 bra $L_store;
$L_loop:
  mad.lo.s32 %r13, %r8, %r11, %r12;
  mul.wide.u32 %rd4, %r13, 4;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.f32 %f2, [%rd5];
  mad.lo.s32 %r14, %r12, %r10, %r4;
  mul.wide.u32 %rd6, %r14, 4;
  add.s64 %rd7, %rd2, %rd6;
  ld.global.f32 %f3, [%rd7];
  fma.rn.f32 %f1, %f2, %f3, %f1;
  add.u32 %r12, %r12, 1;
  setp.lt.u32 %p1, %r12, %r11;
  @%p1 bra $L_loop;
$L_store:
  mad.lo.s32 %r15, %r8, %r10, %r4;
  mul.wide.u32 %rd8, %r15, 4;
  add.s64 %rd9, %rd3, %rd8;
  st.global.f32 [%rd9], %f1;
$L_done:
  ret;
}
"""
