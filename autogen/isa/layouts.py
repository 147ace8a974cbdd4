"""Microcode format layouts (bit fields) per architecture, as given by AMD's ISA reference guides.

Source for gfx11: "AMD RDNA3 Instruction Set Architecture Reference Guide" (Feb 2023), chapter 16 "Microcode Formats"
(16.1 scalar ALU/control: SOP2, SOPK, SOP1, SOPC, SOPP; 16.2 SMEM; 16.3 VOP2, VOP1, VOPC, VOP3, VOP3SD, VOP3P, VOPD,
DPP16/DPP8; 16.4 VINTERP; 16.5 LDSDIR/parameter; 16.6 DS; 16.7 MUBUF/MTBUF; 16.8 MIMG; 16.9 EXP; 16.10 FLAT/GLOBAL/SCRATCH).
Each field is (name, low bit, width) counted over the whole instruction, word 0 = bits 0..31 (little-endian dwords).
The field names are the ones of the ISA document, lower-cased. The generator (gen_rdna3.py) checks every layout
against llvm-mc-19 while it probes the opcode space, so a wrong bit position here fails generation.

`ident` = (low bit, width, value) tuples that identify the encoding; `op` = the opcode field name.
"""

GFX11 = {
  # 16.1 Scalar ALU and control formats (32 bits, + optional 32-bit literal when a source is 255)
  "SOP2": dict(size=4, ident=[(30, 2, 0b10)], op="op",
               fields=[("ssrc0", 0, 8), ("ssrc1", 8, 8), ("sdst", 16, 7), ("op", 23, 7)]),
  "SOPK": dict(size=4, ident=[(28, 4, 0b1011)], op="op",
               fields=[("simm16", 0, 16), ("sdst", 16, 7), ("op", 23, 5)]),
  "SOP1": dict(size=4, ident=[(23, 9, 0b101111101)], op="op",
               fields=[("ssrc0", 0, 8), ("op", 8, 8), ("sdst", 16, 7)]),
  "SOPC": dict(size=4, ident=[(23, 9, 0b101111110)], op="op",
               fields=[("ssrc0", 0, 8), ("ssrc1", 8, 8), ("op", 16, 7)]),
  "SOPP": dict(size=4, ident=[(23, 9, 0b101111111)], op="op",
               fields=[("simm16", 0, 16), ("op", 16, 7)]),
  # 16.2 Scalar memory (64 bits)
  "SMEM": dict(size=8, ident=[(26, 6, 0b111101)], op="op",
               fields=[("sbase", 0, 6), ("sdata", 6, 7), ("dlc", 13, 1), ("glc", 14, 1), ("op", 18, 8),
                       ("offset", 32, 21), ("soffset", 57, 7)]),
  # 16.3 Vector ALU formats
  "VOP2": dict(size=4, ident=[(31, 1, 0)], op="op",
               fields=[("src0", 0, 9), ("vsrc1", 9, 8), ("vdst", 17, 8), ("op", 25, 6)]),
  "VOP1": dict(size=4, ident=[(25, 7, 0b0111111)], op="op",
               fields=[("src0", 0, 9), ("op", 9, 8), ("vdst", 17, 8)]),
  "VOPC": dict(size=4, ident=[(25, 7, 0b0111110)], op="op",
               fields=[("src0", 0, 9), ("vsrc1", 9, 8), ("op", 17, 8)]),
  "VOP3": dict(size=8, ident=[(26, 6, 0b110101)], op="op",
               fields=[("vdst", 0, 8), ("abs", 8, 3), ("opsel", 11, 4), ("clmp", 15, 1), ("op", 16, 10),
                       ("src0", 32, 9), ("src1", 41, 9), ("src2", 50, 9), ("omod", 59, 2), ("neg", 61, 3)]),
  # VOP3SD shares VOP3's opcode space; bits 14:8 hold a scalar destination instead of abs/opsel
  "VOP3SD": dict(size=8, ident=[(26, 6, 0b110101)], op="op",
                 fields=[("vdst", 0, 8), ("sdst", 8, 7), ("clmp", 15, 1), ("op", 16, 10),
                         ("src0", 32, 9), ("src1", 41, 9), ("src2", 50, 9), ("omod", 59, 2), ("neg", 61, 3)]),
  "VOP3P": dict(size=8, ident=[(24, 8, 0b11001100)], op="op",
                fields=[("vdst", 0, 8), ("neg_hi", 8, 3), ("opsel", 11, 3), ("opsel_hi2", 14, 1), ("clmp", 15, 1),
                        ("op", 16, 7), ("src0", 32, 9), ("src1", 41, 9), ("src2", 50, 9), ("opsel_hi", 59, 2),
                        ("neg", 61, 3)]),
  "VOPD": dict(size=8, ident=[(26, 6, 0b110010)], op="opx",
               fields=[("srcx0", 0, 9), ("vsrcx1", 9, 8), ("opy", 17, 5), ("opx", 22, 4),
                       ("srcy0", 32, 9), ("vsrcy1", 41, 8), ("vdsty", 49, 7), ("vdstx", 56, 8)]),
  # 16.4 / 16.5 interpolation and LDS-parameter formats
  "VINTERP": dict(size=8, ident=[(24, 8, 0b11001101)], op="op",
                  fields=[("vdst", 0, 8), ("waitexp", 8, 3), ("opsel", 11, 4), ("clmp", 15, 1), ("op", 16, 7),
                          ("src0", 32, 9), ("src1", 41, 9), ("src2", 50, 9), ("neg", 61, 3)]),
  "LDSDIR": dict(size=4, ident=[(24, 8, 0b11001110)], op="op",
                 fields=[("vdst", 0, 8), ("attr_chan", 8, 2), ("attr", 10, 6), ("waitvdst", 16, 4), ("op", 20, 2)]),
  # 16.6 LDS/GDS
  "DS": dict(size=8, ident=[(26, 6, 0b110110)], op="op",
             fields=[("offset0", 0, 8), ("offset1", 8, 8), ("gds", 17, 1), ("op", 18, 8),
                     ("addr", 32, 8), ("data0", 40, 8), ("data1", 48, 8), ("vdst", 56, 8)]),
  # 16.7 buffer formats
  "MUBUF": dict(size=8, ident=[(26, 6, 0b111000)], op="op",
                fields=[("offset", 0, 12), ("slc", 12, 1), ("dlc", 13, 1), ("glc", 14, 1), ("op", 18, 8),
                        ("vaddr", 32, 8), ("vdata", 40, 8), ("srsrc", 48, 5), ("tfe", 53, 1), ("offen", 54, 1),
                        ("idxen", 55, 1), ("soffset", 56, 8)]),
  "MTBUF": dict(size=8, ident=[(26, 6, 0b111010)], op="op",
                fields=[("offset", 0, 12), ("slc", 12, 1), ("dlc", 13, 1), ("glc", 14, 1), ("op", 15, 4),
                        ("format", 19, 7), ("vaddr", 32, 8), ("vdata", 40, 8), ("srsrc", 48, 5), ("tfe", 53, 1),
                        ("offen", 54, 1), ("idxen", 55, 1), ("soffset", 56, 8)]),
  # 16.8 image (non-NSA form)
  "MIMG": dict(size=8, ident=[(26, 6, 0b111100)], op="op",
               fields=[("nsa", 0, 1), ("dim", 2, 3), ("unrm", 7, 1), ("dmask", 8, 4), ("slc", 12, 1), ("dlc", 13, 1),
                       ("glc", 14, 1), ("r128", 15, 1), ("a16", 16, 1), ("d16", 17, 1), ("op", 18, 8),
                       ("vaddr", 32, 8), ("vdata", 40, 8), ("srsrc", 48, 5), ("tfe", 53, 1), ("lwe", 54, 1),
                       ("ssamp", 58, 5)]),
  # 16.9 export
  "EXP": dict(size=8, ident=[(26, 6, 0b111110)], op=None,
              fields=[("en", 0, 4), ("target", 4, 6), ("done", 11, 1), ("row", 13, 1),
                      ("vsrc0", 32, 8), ("vsrc1", 40, 8), ("vsrc2", 48, 8), ("vsrc3", 56, 8)]),
  # 16.10 FLAT, GLOBAL and SCRATCH share one format; SEG (bits 17:16) selects 0 FLAT, 1 SCRATCH, 2 GLOBAL
  "FLAT": dict(size=8, ident=[(26, 6, 0b110111), (16, 2, 0)], op="op",
               fields=[("offset", 0, 13), ("dlc", 13, 1), ("glc", 14, 1), ("slc", 15, 1), ("seg", 16, 2), ("op", 18, 7),
                       ("addr", 32, 8), ("data", 40, 8), ("saddr", 48, 7), ("sve", 55, 1), ("vdst", 56, 8)]),
  "SCRATCH": dict(size=8, ident=[(26, 6, 0b110111), (16, 2, 1)], op="op",
                  fields=[("offset", 0, 13), ("dlc", 13, 1), ("glc", 14, 1), ("slc", 15, 1), ("seg", 16, 2),
                          ("op", 18, 7), ("addr", 32, 8), ("data", 40, 8), ("saddr", 48, 7), ("sve", 55, 1),
                          ("vdst", 56, 8)]),
  "GLOBAL": dict(size=8, ident=[(26, 6, 0b110111), (16, 2, 2)], op="op",
                 fields=[("offset", 0, 13), ("dlc", 13, 1), ("glc", 14, 1), ("slc", 15, 1), ("seg", 16, 2),
                         ("op", 18, 7), ("addr", 32, 8), ("data", 40, 8), ("saddr", 48, 7), ("sve", 55, 1),
                         ("vdst", 56, 8)]),
}

# DPP16 / DPP8 extra dword (16.3.3/16.3.4): selected by src0 = 250 (DPP16), 233 (DPP8) or 234 (DPP8 with FI=1)
DPP16_FIELDS = [("src0", 0, 8), ("dpp_ctrl", 8, 9), ("fi", 18, 1), ("bc", 19, 1), ("src0_neg", 20, 1),
                ("src0_abs", 21, 1), ("src1_neg", 22, 1), ("src1_abs", 23, 1), ("bank_mask", 24, 4),
                ("row_mask", 28, 4)]
DPP8_FIELDS = [("src0", 0, 8), ("lane_sel", 8, 24)]

# RDNA4 (gfx12): "AMD RDNA4 Instruction Set Architecture Reference Guide", chapter "Microcode Formats". The scalar
# and vector ALU formats and DS keep their gfx11 layouts; SMEM changes (6-bit OP, SCOPE/TH cache policy, 24-bit
# offset) and the memory formats become 96-bit VFLAT/VSCRATCH/VGLOBAL and VBUFFER (MUBUF and MTBUF merged).
# Image (VIMAGE/VSAMPLE), export and interpolation formats are not tabulated yet.
GFX12 = {k: GFX11[k] for k in ("SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "VOP2", "VOP1", "VOPC", "VOP3", "VOP3SD",
                                "VOP3P", "VOPD", "DS")}
GFX12["SMEM"] = dict(size=8, ident=[(26, 6, 0b111101)], op="op",
                     fields=[("sbase", 0, 6), ("sdata", 6, 7), ("op", 13, 6), ("scope", 21, 2), ("th", 23, 2),
                             ("offset", 32, 24), ("soffset", 57, 7)])
_VMEM12 = [("saddr", 0, 7), ("op", 14, 8), ("seg", 24, 2), ("vdst", 32, 8), ("sve", 49, 1), ("scope", 50, 2),
           ("th", 52, 3), ("vsrc", 55, 8), ("vaddr", 64, 8), ("ioffset", 72, 24)]
GFX12["VFLAT"] = dict(size=12, ident=[(26, 6, 0b111011), (24, 2, 0)], op="op", fields=_VMEM12)
GFX12["VSCRATCH"] = dict(size=12, ident=[(26, 6, 0b111011), (24, 2, 1)], op="op", fields=_VMEM12)
GFX12["VGLOBAL"] = dict(size=12, ident=[(26, 6, 0b111011), (24, 2, 2)], op="op", fields=_VMEM12)
GFX12["VBUFFER"] = dict(size=12, ident=[(26, 6, 0b110001)], op="op",
                        fields=[("soffset", 0, 7), ("op", 14, 8), ("tfe", 22, 1), ("vdata", 32, 8), ("rsrc", 41, 9),
                                ("scope", 50, 2), ("th", 52, 3), ("format", 55, 7), ("offen", 62, 1), ("idxen", 63, 1),
                                ("vaddr", 64, 8), ("ioffset", 72, 24)])

# CDNA3 (gfx942): "AMD Instinct MI300 Instruction Set Architecture Reference Guide", chapter "Microcode Formats".
# Scalar ALU and VOP1/VOP2/VOPC keep the layouts above; VOP3 (VOP3A/VOP3B) is identified by 110100 and VOP3P
# (incl. MFMA) by 110100111; SMEM has IMM/GLC/NV/SOFFSET_EN bits and a 21-bit offset. DS has an 8-bit OP at 24:17
# (ACC at 25: AGPR data); FLAT/SCRATCH/GLOBAL have SEG at 15:14, the cache bits SC0 (16), NT (17), SC1 (25), SVE at
# 13 (SCRATCH: VADDR used) and a 7-bit SADDR whose 0x7f means "off" (ACC at 55). MUBUF has the cache bits SC0 (14),
# SC1 (15), NT (17) and LDS (16) where gfx11 has GLC/SLC/DLC, a 7-bit OP at 24:18 and ACC at 55 (MTBUF is not
# tabulated).
GFX942 = {k: GFX11[k] for k in ("SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "VOP2", "VOP1", "VOPC")}
GFX942["VOP3"] = dict(GFX11["VOP3"], ident=[(26, 6, 0b110100)])
GFX942["VOP3SD"] = dict(GFX11["VOP3SD"], ident=[(26, 6, 0b110100)])
GFX942["VOP3P"] = dict(size=8, ident=[(23, 9, 0b110100111)], op="op", fields=GFX11["VOP3P"]["fields"])
GFX942["SMEM"] = dict(size=8, ident=[(26, 6, 0b110000)], op="op",
                      fields=[("sbase", 0, 6), ("sdata", 6, 7), ("soffset_en", 14, 1), ("nv", 15, 1), ("glc", 16, 1),
                              ("imm", 17, 1), ("op", 18, 8), ("offset", 32, 21), ("soffset", 57, 7)])
_FLAT942 = [("offset", 0, 13), ("sve", 13, 1), ("seg", 14, 2), ("sc0", 16, 1), ("nt", 17, 1), ("op", 18, 7),
            ("sc1", 25, 1), ("addr", 32, 8), ("data", 40, 8), ("saddr", 48, 7), ("acc", 55, 1), ("vdst", 56, 8)]
GFX942["DS"] = dict(size=8, ident=[(26, 6, 0b110110)], op="op",
                    fields=[("offset0", 0, 8), ("offset1", 8, 8), ("gds", 16, 1), ("op", 17, 8), ("acc", 25, 1),
                            ("addr", 32, 8), ("data0", 40, 8), ("data1", 48, 8), ("vdst", 56, 8)])
GFX942["FLAT"] = dict(size=8, ident=[(26, 6, 0b110111), (14, 2, 0)], op="op", fields=_FLAT942)
GFX942["SCRATCH"] = dict(size=8, ident=[(26, 6, 0b110111), (14, 2, 1)], op="op", fields=_FLAT942)
GFX942["GLOBAL"] = dict(size=8, ident=[(26, 6, 0b110111), (14, 2, 2)], op="op", fields=_FLAT942)
GFX942["MUBUF"] = dict(size=8, ident=[(26, 6, 0b111000)], op="op",
                       fields=[("offset", 0, 12), ("offen", 12, 1), ("idxen", 13, 1), ("sc0", 14, 1), ("sc1", 15, 1),
                               ("lds", 16, 1), ("nt", 17, 1), ("op", 18, 7), ("vaddr", 32, 8), ("vdata", 40, 8),
                               ("srsrc", 48, 5), ("acc", 55, 1), ("soffset", 56, 8)])

LAYOUTS = {"gfx1100": GFX11, "gfx1200": GFX12, "gfx942": GFX942}
