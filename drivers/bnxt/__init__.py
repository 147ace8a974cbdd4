"""drivers/bnxt"""
