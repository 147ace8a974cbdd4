// Kernels of `hcq demo` and bench/launch.py, built by build.py with clang-19 for gfx1100 (code object v5).
// Work-item ids come from the AMDGPU builtins, so no device library is needed; the work-group size is read from
// the code object v5 hidden arguments (hidden_group_size_*), which the runtime fills in.
#define GID_X (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x())
#define GID_Y (__builtin_amdgcn_workgroup_id_y() * __builtin_amdgcn_workgroup_size_y() + __builtin_amdgcn_workitem_id_y())

__kernel void empty(void) {}

__kernel void vadd(__global const float *a, __global const float *b, __global float *c, uint n) {
  uint i = GID_X;
  if (i < n) c[i] = a[i] + b[i];
}

// c[m x n] = a[m x k] @ b[k x n], row-major; one work-item per element of c
__kernel void matmul(__global const float *a, __global const float *b, __global float *c, uint m, uint n, uint k) {
  uint col = GID_X, row = GID_Y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (uint i = 0; i < k; i++) acc += a[row * k + i] * b[i * n + col];
  c[row * n + col] = acc;
}
