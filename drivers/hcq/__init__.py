"""The generic runtime every vendor driver builds on: Device, Buffer, Signal (value + timestamp slots with timed
waits), Timeline, Ring (command ring with write pointer and doorbell), kernarg layouts and launch checks, and
allocators (address ranges, a wrapping ring for per-launch data)."""
from .alloc import LaunchRing, VARanges, round_up
from .device import Buffer, Device, Timeline
from .kernargs import Arg, KernargLayout, check_launch
from .program import Program
from .queue import Ring
from .signal import SIGNAL_SIZE, Signal, SignalPool

__all__ = ["LaunchRing", "VARanges", "round_up", "Buffer", "Device", "Timeline", "Arg", "KernargLayout",
           "check_launch", "Program", "Ring", "SIGNAL_SIZE", "Signal", "SignalPool"]
