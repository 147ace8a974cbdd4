"""Mock AMD GPU: KFD model, PM4/SDMA engines, wave emulator (emu/)."""
