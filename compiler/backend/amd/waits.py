"""s_waitcnt placement shared by RDNA3 (render.insert_waitcnt) and CDNA3 (gfx9.insert_waitcnt): before an instruction
that reads or writes a pending load's destination, a wait down to the number of operations issued after it (rounded
down to WAIT_GRANULE, so that one wait serves the next few uses); before s_barrier every LDS operation; at labels,
branches and the end everything. The counters differ by target: on gfx9 VM_CNT counts stores too (AMD CDNA3 ISA
"S_WAITCNT"), on gfx11 they have their own VS_CNT (RDNA3 ISA); their widths bound the counts a wait can name."""
from __future__ import annotations

from .isel_mir import MInst

WAIT_GRANULE = 8   # a needed count n is rounded down to a multiple of this: one wait then covers several uses


def insert_counter_waits(code: list[MInst], waitcnt, vm_max: int, lgkm_max: int, stores_on_vm: bool) -> list[MInst]:
  """code with s_waitcnt instructions inserted; waitcnt(vm, lgkm) makes one (vm_max / lgkm_max: no wait on that
  counter, and the largest count it holds)."""
  out: list[MInst] = []
  vm: list = []      # VM_CNT: load destinations (and None for stores where they count), in issue order
  lgkm: list = []    # LGKM_CNT: (destination or None, is_smem)

  def wait(vm_n=None, lgkm_n=None):
    nonlocal vm, lgkm
    if vm_n is None and lgkm_n is None: return
    vm_n = None if vm_n is None else min(vm_n, vm_max)
    lgkm_n = None if lgkm_n is None else min(lgkm_n, lgkm_max)
    out.append(waitcnt(vm_max if vm_n is None else vm_n, lgkm_max if lgkm_n is None else lgkm_n))
    if vm_n is not None: vm = vm[len(vm) - vm_n:] if vm_n else []
    if lgkm_n is not None: lgkm = lgkm[len(lgkm) - lgkm_n:] if lgkm_n else []

  kinds = KINDS
  for m in code:
    name = m.name
    kind = kinds.get(name)
    if kind is None: kind = kind_of(name)
    if kind[0] == JOIN:
      wait(0 if vm else None, 0 if lgkm else None)
    elif kind[0] == BARRIER:
      wait(None, 0 if lgkm else None)
    elif vm or lgkm:   # (nothing pending: nothing to wait for, whatever the instruction reads)
      regs = set(m.regs_used()) | set(m.regs_defined())
      vm_n = lgkm_n = None
      for k, r in enumerate(vm):
        if r is not None and r in regs: vm_n = len(vm) - k - 1
      smem = any(s for _, s in lgkm)
      for k, (r, _) in enumerate(lgkm):
        if r is not None and r in regs: lgkm_n = 0 if smem else len(lgkm) - k - 1
      if vm_n is not None: vm_n -= vm_n % WAIT_GRANULE
      if lgkm_n is not None: lgkm_n -= lgkm_n % WAIT_GRANULE
      wait(vm_n, lgkm_n)
    out.append(m)
    counted = kind[1]
    if not counted: continue
    if counted == VM_LOAD: vm.append(m.defs["vdst"])
    elif counted == VM_STORE:
      if stores_on_vm: vm.append(None)
    elif counted == LDS_LOAD: lgkm.append((m.defs["vdst"], False))
    elif counted == LDS_STORE: lgkm.append((None, False))
    else: lgkm.append((m.defs["sdata"], True))
  return out


# what a mnemonic is to the placement (here and gfx12.insert_waits): (JOIN / BARRIER / 0, the counter it issues on:
# VM_LOAD ... SMEM_LOAD / 0), by its prefix, once per mnemonic
JOIN, BARRIER = 1, 2
VM_LOAD, VM_STORE, LDS_LOAD, LDS_STORE, SMEM_LOAD = 1, 2, 3, 4, 5
KINDS: dict[str, tuple[int, int]] = {}


def kind_of(name: str) -> tuple[int, int]:
  k = KINDS.get(name)
  if k is None: k = KINDS[name] = _kind(name)
  return k


def _kind(name: str) -> tuple[int, int]:
  at = JOIN if name == "LABEL" or name.startswith(("s_branch", "s_cbranch", "s_endpgm")) else \
      BARRIER if name == "s_barrier" else 0
  if name.startswith(("global_load", "scratch_load")): counted = VM_LOAD
  elif name.startswith(("global_store", "scratch_store")): counted = VM_STORE
  elif name.startswith("ds_load"): counted = LDS_LOAD
  elif name.startswith("ds_store"): counted = LDS_STORE
  elif name.startswith("s_load"): counted = SMEM_LOAD
  else: counted = 0
  return at, counted
