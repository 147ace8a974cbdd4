"""Compute class numbers and the compute-class methods a driver sends, per class family.

Sources (the numbers were copied from these files):
- NVIDIA/open-gpu-kernel-modules src/common/sdk/nvidia/inc/class/clc7c0.h (AMPERE_COMPUTE_B, commit 1739a20e): the
  whole method list; clcdc0.h (commit 448d5cc6): BLACKWELL_COMPUTE_A = 0xCDC0 (that file holds the class number only).
- NVIDIA/open-gpu-doc classes/compute/clcbc0.h (HOPPER_COMPUTE_A, commit 5d957df1), clc9c0.h (ADA_COMPUTE_A),
  clcec0.h (BLACKWELL_COMPUTE_B, commit c84b8d41).
Every method below has the same offset in clc7c0.h and clcbc0.h (both read in full for these), and in clcec0.h for
those it was read for (NON_THROTTLED_A..C, SET_SPA_VERSION, SET_INLINE_QMD_ADDRESS_A/B, LOAD_INLINE_QMD_DATA,
SET_SHADER_LOCAL_MEMORY_A/B, SET_SHADER_LOCAL_MEMORY_WINDOW_A/B); Blackwell A (cdc0) has no public method header:
its offsets are taken to be Blackwell B's.
Method offsets are byte offsets (the pushbuffer method header carries offset >> 2). Fields are (hi, lo) bit ranges.
The host (GPFIFO) and copy classes come from the generated bindings (hcq.autogen.nv.clc56f, clc6b5, ...).
"""
from __future__ import annotations

AMPERE_COMPUTE_A = 0xC6C0
AMPERE_COMPUTE_B = 0xC7C0
ADA_COMPUTE_A = 0xC9C0
HOPPER_COMPUTE_A = 0xCBC0
BLACKWELL_COMPUTE_A = 0xCDC0
BLACKWELL_COMPUTE_B = 0xCEC0

# compute class -> QMD major version the class reads (V03_00 up to Ada, V04_00 on Hopper, V05_00 on Blackwell:
# the QMD headers clc9c0qmd.h / clcbc0qmd.h / clcdc0qmd.h each define the newest version of their class)
QMD_MAJOR = {AMPERE_COMPUTE_A: 3, AMPERE_COMPUTE_B: 3, ADA_COMPUTE_A: 3, HOPPER_COMPUTE_A: 4,
             BLACKWELL_COMPUTE_A: 5, BLACKWELL_COMPUTE_B: 5}
COMPUTE_NAMES = {AMPERE_COMPUTE_A: "AMPERE_COMPUTE_A", AMPERE_COMPUTE_B: "AMPERE_COMPUTE_B",
                 ADA_COMPUTE_A: "ADA_COMPUTE_A", HOPPER_COMPUTE_A: "HOPPER_COMPUTE_A",
                 BLACKWELL_COMPUTE_A: "BLACKWELL_COMPUTE_A", BLACKWELL_COMPUTE_B: "BLACKWELL_COMPUTE_B"}


class ComputeMethods:
  """Compute-class method byte offsets (NVC?C0_<name>), the same in c7c0, c9c0, cbc0 and cec0."""
  SET_OBJECT = 0x0000
  NO_OPERATION = 0x0100
  SET_NOTIFY_A = 0x0104
  SET_NOTIFY_B = 0x0108
  NOTIFY = 0x010C
  WAIT_FOR_IDLE = 0x0110
  PM_TRIGGER = 0x0140
  PM_TRIGGER_WFI = 0x0144
  SET_REPORT_SEMAPHORE_PAYLOAD_LOWER = 0x0158
  SET_REPORT_SEMAPHORE_PAYLOAD_UPPER = 0x015C
  SET_REPORT_SEMAPHORE_ADDRESS_LOWER = 0x0160
  SET_REPORT_SEMAPHORE_ADDRESS_UPPER = 0x0164
  REPORT_SEMAPHORE_EXECUTE = 0x0168
  LINE_LENGTH_IN = 0x0180
  LINE_COUNT = 0x0184
  OFFSET_OUT_UPPER = 0x0188
  OFFSET_OUT = 0x018C
  PITCH_OUT = 0x0190
  SET_DST_BLOCK_SIZE = 0x0194
  SET_DST_WIDTH = 0x0198
  SET_DST_HEIGHT = 0x019C
  LAUNCH_DMA = 0x01B0
  LOAD_INLINE_DATA = 0x01B4
  INVALIDATE_SHADER_CACHES = 0x021C
  SET_SHADER_SHARED_MEMORY_WINDOW_A = 0x02A0
  SET_SHADER_SHARED_MEMORY_WINDOW_B = 0x02A4
  SET_CWD_SLOT_COUNT = 0x02B0
  SEND_PCAS_A = 0x02B4
  SEND_PCAS_B = 0x02B8
  SEND_SIGNALING_PCAS_B = 0x02BC
  SEND_SIGNALING_PCAS2_B = 0x02C0
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x02E4
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B = 0x02E8
  SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C = 0x02EC
  SET_SPA_VERSION = 0x0310
  SET_INLINE_QMD_ADDRESS_A = 0x0318
  SET_INLINE_QMD_ADDRESS_B = 0x031C
  LOAD_INLINE_QMD_DATA_0 = 0x0320          # LOAD_INLINE_QMD_DATA(i) = 0x0320 + 4*i
  SET_SHADER_LOCAL_MEMORY_A = 0x0790
  SET_SHADER_LOCAL_MEMORY_B = 0x0794
  SET_SHADER_LOCAL_MEMORY_WINDOW_A = 0x07B0
  SET_SHADER_LOCAL_MEMORY_WINDOW_B = 0x07B4
  INVALIDATE_TEXTURE_DATA_CACHE_NO_WFI = 0x1288
  INVALIDATE_SAMPLER_CACHE = 0x1330
  INVALIDATE_TEXTURE_HEADER_CACHE = 0x1334
  INVALIDATE_TEXTURE_DATA_CACHE = 0x1338
  INVALIDATE_SAMPLER_CACHE_NO_WFI = 0x1424
  SET_SHADER_EXCEPTIONS = 0x1528
  INVALIDATE_SHADER_CACHES_NO_WFI = 0x1698
  PIPE_NOP = 0x1A2C
  SET_REPORT_SEMAPHORE_A = 0x1B00
  SET_REPORT_SEMAPHORE_B = 0x1B04
  SET_REPORT_SEMAPHORE_C = 0x1B08
  SET_REPORT_SEMAPHORE_D = 0x1B0C

  @staticmethod
  def LOAD_INLINE_QMD_DATA(i: int) -> int:
    return 0x0320 + 4 * i


def compute_method_names() -> dict[int, str]:
  """byte offset -> method name (for decoders), LOAD_INLINE_QMD_DATA(i) as LOAD_INLINE_QMD_DATA_<i>."""
  out = {v: k for k, v in vars(ComputeMethods).items() if k.isupper() and isinstance(v, int)}
  for i in range(1, 96): out[ComputeMethods.LOAD_INLINE_QMD_DATA(i)] = f"LOAD_INLINE_QMD_DATA_{i}"
  return out


# method fields, (hi, lo) as in the class headers (NVC?C0_<METHOD>_<FIELD>), and their named values
FIELDS = {
  "SET_OBJECT": {"CLASS_ID": (15, 0), "ENGINE_ID": (20, 16)},
  "SEND_PCAS_A": {"QMD_ADDRESS_SHIFTED8": (31, 0)},
  "SEND_SIGNALING_PCAS_B": {"INVALIDATE": (0, 0), "SCHEDULE": (1, 1)},
  "SEND_SIGNALING_PCAS2_B": {"PCAS_ACTION": (3, 0), "SELECT": (13, 8), "OFFSET_MINUS_ONE": (23, 14)},
  "SET_SHADER_SHARED_MEMORY_WINDOW_A": {"BASE_ADDRESS_UPPER": (16, 0)},
  "SET_SHADER_SHARED_MEMORY_WINDOW_B": {"BASE_ADDRESS": (31, 0)},
  "SET_SHADER_LOCAL_MEMORY_WINDOW_A": {"BASE_ADDRESS_UPPER": (16, 0)},
  "SET_SHADER_LOCAL_MEMORY_WINDOW_B": {"BASE_ADDRESS": (31, 0)},
  "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A": {"SIZE_UPPER": (7, 0)},
  "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B": {"SIZE_LOWER": (31, 0)},
  "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C": {"MAX_SM_COUNT": (8, 0)},
  "SET_SHADER_LOCAL_MEMORY_B": {"ADDRESS_LOWER": (31, 0)},
  "INVALIDATE_SHADER_CACHES": {"INSTRUCTION": (0, 0), "LOCKS": (1, 1), "FLUSH_DATA": (2, 2), "DATA": (4, 4),
                               "CONSTANT": (12, 12)},
  "INVALIDATE_SHADER_CACHES_NO_WFI": {"INSTRUCTION": (0, 0), "GLOBAL_DATA": (4, 4), "CONSTANT": (12, 12)},
  "REPORT_SEMAPHORE_EXECUTE": {"OPERATION": (1, 0), "AWAKEN_ENABLE": (2, 2), "STRUCTURE_SIZE": (4, 3),
                               "FLUSH_DISABLE": (5, 5), "REDUCTION_ENABLE": (6, 6), "REDUCTION_OP": (9, 7),
                               "REDUCTION_FORMAT": (11, 10), "PAYLOAD_SIZE64": (12, 12), "TRAP_TYPE": (14, 13)},
  "SET_REPORT_SEMAPHORE_D": {"OPERATION": (1, 0), "FLUSH_DISABLE": (2, 2), "REDUCTION_ENABLE": (3, 3),
                             "REDUCTION_OP": (11, 9), "AWAKEN_ENABLE": (20, 20), "STRUCTURE_SIZE": (28, 28)},
}
PCAS_ACTION = {"NOP": 0, "INVALIDATE": 1, "SCHEDULE": 2, "INVALIDATE_COPY_SCHEDULE": 3, "INCREMENT_PUT": 6,
               "DECREMENT_DEPENDENCE": 7, "PREFETCH": 8, "PREFETCH_SCHEDULE": 9,
               "INVALIDATE_PREFETCH_COPY_SCHEDULE": 10, "INVALIDATE_PREFETCH_COPY_FORCE_REQUIRE_SCHEDULING": 11,
               "INCREMENT_DEPENDENCE": 12, "INCREMENT_CWD_REF_COUNTER": 13}
REPORT_SEMAPHORE_OPERATION = {"RELEASE": 0, "ACQUIRE": 1, "REPORT_ONLY": 2, "TRAP": 3}
# SET_REPORT_SEMAPHORE_D_STRUCTURE_SIZE (one bit) and REPORT_SEMAPHORE_EXECUTE_STRUCTURE_SIZE (two bits)
REPORT_SEMAPHORE_D_STRUCTURE_SIZE = {"FOUR_WORDS": 0, "ONE_WORD": 1}
REPORT_SEMAPHORE_EXECUTE_STRUCTURE_SIZE = {"SEMAPHORE_FOUR_WORDS": 0, "SEMAPHORE_ONE_WORD": 1, "SEMAPHORE_TWO_WORDS": 2}


def field(method: str, name: str, value: int) -> int:
  """`value` placed in the method's field (e.g. field("SEND_SIGNALING_PCAS2_B", "PCAS_ACTION", 9))."""
  hi, lo = FIELDS[method][name]
  if not 0 <= value < (1 << (hi - lo + 1)):
    from hcq.errors import HCQError
    raise HCQError(f"{method}.{name} is {hi - lo + 1} bits: {value:#x} does not fit")
  return value << lo


# ---------------------------------------------------------------- host (GPFIFO) and copy classes
# Ampere/Hopper ones are the generated bindings' (nvidia-open-kernel-source 550.163.01, checked against gcc); the
# Blackwell ones are not in that release: their numbers are g_allclasses.h's (open-gpu-kernel-modules
# src/nvidia/generated, found by text search: BLACKWELL_CHANNEL_GPFIFO_A 0xc96f, BLACKWELL_DMA_COPY_A 0xc9b5; the _B
# classes 0xca6f / 0xcab5 as kernel-open/nvidia-uvm/clcab5.h names them).
from hcq.autogen.nv import clc6b5 as _c6b5, clc7b5 as _c7b5, clc8b5 as _c8b5, clc56f as _c56f, clc86f as _c86f  # noqa: E402

AMPERE_CHANNEL_GPFIFO_A = _c56f.AMPERE_CHANNEL_GPFIFO_A
HOPPER_CHANNEL_GPFIFO_A = _c86f.HOPPER_CHANNEL_GPFIFO_A
BLACKWELL_CHANNEL_GPFIFO_A = 0xC96F
BLACKWELL_CHANNEL_GPFIFO_B = 0xCA6F
AMPERE_DMA_COPY_A = _c6b5.AMPERE_DMA_COPY_A
AMPERE_DMA_COPY_B = _c7b5.AMPERE_DMA_COPY_B
HOPPER_DMA_COPY_A = _c8b5.HOPPER_DMA_COPY_A
BLACKWELL_DMA_COPY_A = 0xC9B5
BLACKWELL_DMA_COPY_B = 0xCAB5

# newest first: a driver picks the first class of each list that the GPU's class list holds
COMPUTE_PREFERENCE = (BLACKWELL_COMPUTE_B, BLACKWELL_COMPUTE_A, HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B,
                      AMPERE_COMPUTE_A)
COPY_PREFERENCE = (BLACKWELL_DMA_COPY_B, BLACKWELL_DMA_COPY_A, HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B, AMPERE_DMA_COPY_A)
GPFIFO_PREFERENCE = (BLACKWELL_CHANNEL_GPFIFO_B, BLACKWELL_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A,
                     AMPERE_CHANNEL_GPFIFO_A)


def pick(preference: tuple, available) -> int | None:
  """The first class of `preference` that `available` (a GPU's class list) holds, or None."""
  have = set(available)
  return next((c for c in preference if c in have), None)
