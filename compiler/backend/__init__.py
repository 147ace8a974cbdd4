"""Code generators: C, PTX and AMD RDNA3 (amd/)."""
