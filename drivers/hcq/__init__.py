"""The runtime every vendor driver stands on (see README.md in this folder):

  device.py    Device (the public API of DESIGN.md §4: argument checks, close, context manager), Buffer, Timeline
  runtime.py   HCQDevice: timeline, Submission, cross-engine waits, launch data, staging copies, fault latch,
               completion hook, thread safety
  engine.py    Engine / RingEngine: a hardware queue with its packet table, encoder and submit; the runtime's
               queue-program placeholders
  cmdbuf.py    command buffers built once and patched at submit (Sym, Patch, lo/hi)
  bound.py     BoundLaunch: launches recorded once and replayed
  program.py   Program: argument and launch checks, per-shape data, the call that launches
  args.py      ArgLayout (the argument-layout protocol each vendor implements) and check_launch
  queue.py     Ring: a command ring with write pointer and doorbell
  signal.py    Signal, SignalPool: value + timestamp slots with timed waits
  alloc.py     VARanges (address ranges), LaunchRing (wrapping per-launch data)
  registry.py  Driver / Interface: how a driver declares its interfaces and mocks to hcq.open"""
from .alloc import LaunchRing, VARanges, round_up
from .args import ArgLayout, check_launch
from .device import Buffer, Device, Timeline
from .program import LaunchShape, Program
from .ring import Ring
from .signal import SIGNAL_SIZE, Signal, SignalPool

__all__ = ["LaunchRing", "VARanges", "round_up", "ArgLayout", "check_launch", "Buffer", "Device", "Timeline",
           "LaunchShape", "Program", "Ring", "SIGNAL_SIZE", "Signal", "SignalPool"]
