"""tinygrad imports `test.mockgpu.mockgpu` (and `test.mockgpu.usb`) when DEV's interface starts with MOCK: this package
is that name, on sys.path only in the tinygrad subprocesses of tests/tinygrad_client."""
